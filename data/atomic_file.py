"""Files written whole or not at all: the one way this project writes a file someone may be reading.

A reader (translate.py, a browser, a resumed run) sees the old file or the new one, never half of
one: the new content goes to a temporary file beside the target, is flushed to disk, then renamed
over it (a rename within one folder is atomic).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_file(path: str | Path, mode: str = "w", partial: Path | None = None,
                keep_on: tuple[type[BaseException], ...] = ()) -> Iterator[IO]:
    """Open a temporary file to write ``path`` with (UTF-8 text, or bytes); when the block ends it is flushed,
    synced and renamed over ``path``. On an error it is removed and ``path`` is untouched; on one of ``keep_on``
    (say ``KeyboardInterrupt``) it is kept, with what was written. ``partial``: the temporary file's path
    (default: a hidden file beside ``path``)."""
    path = Path(path)
    partial = partial or path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, mode, encoding=None if "b" in mode else "utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except keep_on:
        raise
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | Path, text: str) -> Path:
    """``path.write_text(text)`` (UTF-8), whole or not at all."""
    with atomic_file(path) as out:
        out.write(text)
    return Path(path)


def os_cause(error: BaseException | None) -> OSError | None:
    """The operating system's error behind ``error`` (a full disk, a read-only folder), or None: libraries
    wrap it in their own (torch.save: a RuntimeError "unexpected pos"; datasets and pyarrow likewise)."""
    while error is not None and not isinstance(error, OSError):
        error = error.__cause__ or error.__context__
    return error
