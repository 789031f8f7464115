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
Typed or piped lines are translated as soon as they arrive. output=FILE is written to
FILE.partial and renamed when done; Ctrl-C keeps what was translated there (exit 130).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException


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


def chunks(lines: Iterable[str], size: int, waiting: Callable[[], bool] = lambda: True) -> Iterator[list[str]]:
    """Groups of at most ``size`` lines; a group also ends when no more input is ``waiting()``
    (someone typing, or a pipe's writer pausing), so each line is answered at once."""
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size or not waiting():
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def check_paths(cfg: TranslateConfig, sentences: list[str]) -> None:
    """Refuse, before the model loads, what would fail or lose data later."""
    reads_file = cfg.input and cfg.input != "-" and not sentences
    if reads_file and not Path(cfg.input).is_file():
        raise SystemExit(f"translate.py: input file {cfg.input} does not exist")
    if cfg.output:
        output = Path(cfg.output)
        if not output.parent.is_dir():
            raise SystemExit(f"translate.py: output folder {output.parent} does not exist")
        if reads_file and output.exists() and os.path.samefile(output, cfg.input):
            raise SystemExit(f"translate.py: output={cfg.output} is the input file: it would be overwritten")
    if cfg.attention and not Path(cfg.attention).parent.is_dir():
        raise SystemExit(f"translate.py: attention folder {Path(cfg.attention).parent} does not exist")


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
    check_paths(cfg, sentences)
    logging.basicConfig(format="translate.py: warning: %(message)s", level=logging.WARNING)
    from data.lines import LineReader  # heavy imports after the argument checks
    from model.search import SearchConfig
    from model.translator import RunLoadError, Translator

    try:
        search = SearchConfig(cfg.beam_size, cfg.length_penalty, cfg.max_len_a, cfg.max_len_b)
        translator = Translator.load(cfg.run, cfg.device)
    except (ValueError, RunLoadError) as error:
        raise SystemExit(f"translate.py: {error}") from None

    done, drawn, reader = 0, None, None  # drawn: (source line, translation, its attention)
    with contextlib.ExitStack() as files:
        if sentences:
            lines: Iterable[str] = sentences
        else:
            stream = files.enter_context(open(cfg.input, "rb")) if cfg.input and cfg.input != "-" else sys.stdin.buffer
            lines = reader = LineReader(stream, max_bytes=4 * translator.max_source_chars)
        # An output file is written beside its target and renamed at the end: never half-written.
        partial = Path(f"{cfg.output}.partial") if cfg.output else None
        out = files.enter_context(open(partial, "w", encoding="utf-8")) if partial else sys.stdout
        try:
            for chunk in chunks(lines, cfg.chunk_size, reader.waiting if reader else lambda: True):
                first = next((i for i, line in enumerate(chunk) if line.strip()), None)
                wanted = first if cfg.attention and drawn is None else None
                translations, attention = translator.translate_lines(chunk, search, cfg.batch_size, wanted)
                if attention is not None:
                    drawn = (chunk[wanted].strip(), translations[wanted], attention)
                out.write("".join(t + "\n" for t in translations))
                out.flush()
                done += len(chunk)
        except KeyboardInterrupt:
            kept = f"; they are in {partial}" if partial else ""
            print(f"translate.py: interrupted after {done} line(s){kept}", file=sys.stderr)
            return 130
        except BrokenPipeError:  # `… | head`: the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error when Python flushes at exit
            return 0
    if partial:
        os.replace(partial, cfg.output)
    report(translator, reader)
    if drawn:
        text, translation, attention = drawn
        for path in translator.draw_attention(attention, text, translation, cfg.attention, cfg.attention_all):
            print(f"attention map written to {path}", file=sys.stderr)
    return 0


def report(translator, reader) -> None:
    """One warning per kind of input that was changed to be translatable."""
    if translator.truncated:
        warn(f"{translator.truncated} sentence(s) longer than {translator.max_source_tokens} tokens were truncated")
    if reader is not None and reader.cut_lines:
        warn(f"{reader.cut_lines} line(s) longer than {reader.max_bytes} bytes were cut there")
    if reader is not None and reader.invalid_lines:
        warn(f"invalid UTF-8 in {reader.invalid_lines} line(s) was replaced with U+FFFD")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while the model loads: nothing was written yet
        sys.exit(130)
