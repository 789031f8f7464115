"""Text lines from a file or a pipe, safely: bounded memory, valid text, no waiting on a typist.

``LineReader`` reads a byte stream in blocks and yields lines as text:

- a line longer than ``max_bytes`` is cut there (the rest, up to its newline, is skipped),
  so a multi-GB input without newlines needs no more memory than one block;
- invalid UTF-8 is replaced with U+FFFD;
- ``waiting()`` tells whether more input is at hand right now: a terminal or a pipe whose
  writer is waiting says no, so a caller can translate each typed line at once, while a
  file says yes and keeps its large batches.

Counts of cut lines and replaced bytes are kept for one warning each, at the end.
"""

from __future__ import annotations

import os
import select
import unicodedata
from collections.abc import Iterator
from typing import BinaryIO


class LineReader:
    """Lines of ``stream`` as text, each at most ``max_bytes`` long (see the module docstring)."""

    def __init__(self, stream: BinaryIO, max_bytes: int = 1 << 16, block: int = 1 << 16) -> None:
        self.stream, self.fd = stream, stream.fileno()  # the stream is kept: its fd lives as long
        self.max_bytes, self.block = max_bytes, block
        self.buffer = bytearray()
        self.cut_lines = 0  # lines longer than max_bytes
        self.invalid_lines = 0  # lines with bytes that are not UTF-8
        self._skipping = False  # inside the rest of a cut line
        self._eof = False

    def waiting(self) -> bool:
        """True if a line can be returned now without blocking on the input."""
        if b"\n" in self.buffer or self._eof:
            return True
        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):  # not selectable (e.g. some Windows handles): assume a file
            return True

    def _fill(self) -> None:
        data = os.read(self.fd, self.block)
        self.buffer += data
        self._eof = not data

    def __iter__(self) -> Iterator[str]:
        while True:
            newline = self.buffer.find(b"\n")
            if newline < 0 and not self._eof and len(self.buffer) <= self.max_bytes:
                self._fill()
                continue
            if newline < 0 and not self.buffer:  # end of input
                return
            end = newline if 0 <= newline else len(self.buffer)
            raw, self.buffer = bytes(self.buffer[:end]), self.buffer[end + 1 :]
            if self._skipping:  # the tail of a line that was already cut and yielded
                self._skipping = newline < 0
                continue
            if len(raw) > self.max_bytes:
                cut = self.max_bytes
                while cut > 0 and raw[cut] & 0xC0 == 0x80:  # never split a character
                    cut -= 1
                raw, self._skipping = raw[:cut], newline < 0
                self.cut_lines += 1
            text = raw.decode("utf-8", errors="replace").rstrip("\r")
            self.invalid_lines += "\ufffd" in text and b"\xef\xbf\xbd" not in raw  # a replaced byte, not a typed U+FFFD
            yield text


# Control characters (C0, DEL, C1) but the tab, and the line and paragraph separators: a tokenizer reads them
# as noise, a terminal obeys them, and ``str.splitlines`` would make two lines of one.
CONTROL = dict.fromkeys([*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029], " ")


def clean_text(text: str) -> str:
    """Text any tokenizer takes: lone surrogates (which JSON's ``\\ud800`` escapes can produce and UTF-8
    cannot encode) become U+FFFD, control characters become spaces."""
    if any("\ud800" <= char <= "\udfff" for char in text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.translate(CONTROL)


def normalized(line: str) -> str:
    """One line as every entry point reads it, before anything else: a byte-order mark at its start dropped,
    Unicode NFC (an NFD line is the same line), then ``clean_text``. Tabs stay; U+2028, U+0085 and form
    feeds stay inside their line (as spaces): only ``\\n`` (and ``\\r\\n``) end a line, in ``LineReader``."""
    return clean_text(unicodedata.normalize("NFC", line.removeprefix("\ufeff")))
