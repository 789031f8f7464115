"""Translate English to Spanish with a trained run.  Options are key=value; other arguments are sentences.

    python translate.py run=outputs/my_run "I like cats." "Where is the station?"
    cat english.txt | python translate.py run=outputs/my_run > spanish.txt
    python translate.py run=outputs/my_run input=english.txt output=spanish.txt beam_size=1
    python translate.py run=outputs/my_run "The sky is blue." attention=sky.html
    python translate.py run=outputs/my_run "The sky is blue." attention=sky.png attention_all=true

Options (defaults in brackets):
  run=PATH            run folder made by train.py, or a .ckpt file inside one        [required]
  input=FILE          read sentences from FILE, one a line ("-" = standard input)     [stdin if no sentences]
  output=FILE         write translations to FILE, one line per input line            [stdout]
  beam_size=N         beam search width; 1 = greedy decoding                         [5]
  length_penalty=A    GNMT length penalty alpha for beam search                      [0.6]
  max_len_a=A         longest output = A * source tokens + B                         [1.5]
  max_len_b=B                                                                         [10]
  batch_size=N        sentences per batch (sorted by length within a chunk)          [64]
  chunk_size=N        lines read at a time from a stream: bounds the memory used     [2000]
  device=D            auto | cpu | cuda                                              [auto]
  attention=FILE      the first sentence's attention: FILE.html = interactive explorer  [none]
                      (every kind, layer, head); FILE.png = cross-attention picture
  attention_all=BOOL  with attention=FILE.png: every layer and head, plus both self-attentions [false]

Empty lines give empty lines (the line count is always kept); over-long sentences are
cut to the model's limit and invalid UTF-8 bytes are replaced, each with one warning.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

if TYPE_CHECKING:
    from model.search import SearchConfig, SentenceAttention

OPTION = re.compile(r"^[a-z_]+=")


@dataclass
class TranslateConfig:
    run: str | None = None
    input: str | None = None
    output: str | None = None
    beam_size: int = 5
    length_penalty: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64
    chunk_size: int = 2000
    device: str = "auto"
    attention: str | None = None
    attention_all: bool = False


def parse_args(argv: list[str]) -> tuple[TranslateConfig, list[str]]:
    """``key=value`` options (checked against TranslateConfig) and the sentences."""
    options = [a for a in argv if OPTION.match(a)]
    sentences = [a for a in argv if not OPTION.match(a)]
    schema = OmegaConf.structured(TranslateConfig)
    try:
        cfg = OmegaConf.merge(schema, OmegaConf.from_dotlist(options))
    except OmegaConfBaseException as error:
        raise SystemExit(f"translate.py: bad option: {str(error).splitlines()[0]} (see --help)") from None
    return OmegaConf.to_object(cfg), sentences


def warn(message: str) -> None:
    """One line on stderr: stdout carries only translations."""
    print(f"translate.py: warning: {message}", file=sys.stderr)


def text_lines(stream: io.BufferedIOBase) -> Iterator[str]:
    """Lines of a byte stream as text; invalid UTF-8 is replaced (one warning for the stream)."""
    warned = False
    for raw in stream:
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if "\ufffd" in text and not warned and b"\xef\xbf\xbd" not in raw:
            warn("invalid UTF-8 in the input was replaced with U+FFFD")
            warned = True
        yield text


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def translate_lines(translator, lines: list[str], cfg: TranslateConfig, search: SearchConfig,
                    attention_line: int | None = None) -> tuple[list[str], int, SentenceAttention | None]:
    """Translate one chunk: empty lines stay empty, the rest go in length-sorted batches.

    ``attention_line``: the line whose attention weights to return, from the same search
    that produced its translation.
    """
    outputs, attention = [""] * len(lines), None
    todo = [i for i, line in enumerate(lines) if line.strip()]
    ids, truncated = translator.encode([lines[i].strip() for i in todo])
    order = sorted(range(len(todo)), key=lambda j: len(ids[j]))  # similar lengths batch together
    for start in range(0, len(order), cfg.batch_size):
        batch = order[start : start + cfg.batch_size]
        wanted = tuple(k for k, j in enumerate(batch) if todo[j] == attention_line)
        texts, maps = translator.translate_ids([ids[j] for j in batch], search, wanted)
        for j, text in zip(batch, texts):
            outputs[todo[j]] = text
        attention = maps[wanted[0]] if wanted else attention
    return outputs, truncated, attention


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    cfg, sentences = parse_args(argv)
    if not cfg.run:
        raise SystemExit("translate.py: run=PATH is required (a run folder from train.py); see --help")
    if cfg.batch_size < 1 or cfg.chunk_size < 1:
        raise SystemExit(f"translate.py: batch_size and chunk_size must be at least 1 "
                         f"(got {cfg.batch_size}, {cfg.chunk_size})")
    if cfg.input and cfg.input != "-" and not sentences and not Path(cfg.input).is_file():
        raise SystemExit(f"translate.py: input file {cfg.input} does not exist")
    from model.search import SearchConfig  # heavy imports after the argument check
    from model.translator import RunLoadError, Translator

    try:
        search = SearchConfig(cfg.beam_size, cfg.length_penalty, cfg.max_len_a, cfg.max_len_b)
    except ValueError as error:
        raise SystemExit(f"translate.py: {error}") from None
    try:
        translator = Translator.load(cfg.run, cfg.device)
    except RunLoadError as error:
        raise SystemExit(f"translate.py: {error}") from None

    with contextlib.ExitStack() as files:
        if sentences:
            lines: Iterable[str] = sentences
        elif cfg.input and cfg.input != "-":
            lines = text_lines(files.enter_context(open(cfg.input, "rb")))
        else:
            lines = text_lines(sys.stdin.buffer)
        out = files.enter_context(open(cfg.output, "w", encoding="utf-8")) if cfg.output else sys.stdout
        truncated, drawn = 0, None  # drawn: (source line, translation, its attention)
        for chunk in chunks(lines, cfg.chunk_size):
            first = next((i for i, line in enumerate(chunk) if line.strip()), None)
            wanted = first if cfg.attention and drawn is None else None
            translations, cut, attention = translate_lines(translator, chunk, cfg, search, wanted)
            if attention is not None:
                drawn = (chunk[wanted].strip(), translations[wanted], attention)
            truncated += cut
            out.write("".join(t + "\n" for t in translations))
            out.flush()
    if truncated:
        warn(f"{truncated} sentence(s) longer than {translator.max_source_tokens} tokens were truncated")
    if drawn:
        text, translation, attention = drawn
        for path in translator.draw_attention(attention, text, translation, cfg.attention, cfg.attention_all):
            print(f"attention map written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
