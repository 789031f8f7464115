"""Translate with a trained run, from its source language to its target language (the data.source_lang and
data.target_lang of its config.yaml; English to Spanish for a run that names none).  Options are key=value;
other arguments are sentences.

    python translate.py run=outputs/my_run "I like cats." "Where is the station?"
    cat english.txt | python translate.py run=outputs/my_run > spanish.txt
    python translate.py run=outputs/my_run input=english.txt output=spanish.txt beam_size=1
    python translate.py run=outputs/my_run "The sky is blue." attention=sky.html
    python translate.py run=outputs/my_run "The sky is blue." attention=sky.png attention_all=true
    python translate.py run=outputs/my_run input=english.txt scores=true   # TSV: translation, score, mark, flags, agreement
    python translate.py run=outputs/my_run "The sky is blue." alignments=true   # El cielo es azul.<TAB>0-0 1-1 2-2 3-3
    python translate.py run=outputs/my_run serve=true

Options (defaults in brackets; "the run's" = what the run was trained with, in its config.yaml):
{options}
  -- SENTENCE ...     everything after -- is a sentence, even with "=" in it

Each line is translated sentence by sentence and joined back: paragraphs, list items, labels ("Note: ..."),
headings and lines in capitals; empty lines give empty lines (the line count is always kept). A sentence longer
than the model reads is cut at its inner punctuation; one that still does not fit is truncated, and invalid
UTF-8 bytes are replaced, each with one warning (the truncated lines by number). Typed or piped lines are
translated as soon as they arrive. output=FILE is written to FILE.partial and renamed when done; Ctrl-C keeps
what was translated there (exit 130). output= must be a regular file or a new path (a directory, device or FIFO
is refused); a link to a file is written through to its target. beam_size is at most 64.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from serving.limits import Limits
from serving.options import option, options_help

if TYPE_CHECKING:  # torch and the model load after the arguments are checked
    from model.inference.translator import Translation, Translator

OPTION = re.compile(r"^[a-z_]+(\.[a-z_]+)?=")
ATTENTION_SUFFIXES = (".html", ".png", ".svg", ".pdf")
SEARCH_OPTIONS = ("beam_size", "length_penalty", "max_len_a", "max_len_b", "max_sentence_len")


@dataclass
class ServeOptions(Limits):
    """serve=BOOL (``enabled``) and the server's limits, serve.*."""

    enabled: bool = False


THE_RUNS = "the run's module.search"


@dataclass
class TranslateConfig:
    """translate.py's options; its ``--help`` is made from these fields."""

    run: str | None = option(None, "PATH", "run folder made by train.py, or a .ckpt file inside one", "required")
    input: str | None = option(None, "FILE", 'read sentences from FILE, one a line ("-" = standard input)',
                               "stdin if no sentences")
    output: str | None = option(None, "FILE", "write translations to FILE, one line per input line", "stdout")
    # None: the run's own setting (its config.yaml), else model.search.SearchConfig's default.
    beam_size: int | None = option(None, "N", "beam search width; 1 = greedy decoding", THE_RUNS)
    length_penalty: float | None = option(None, "A", "GNMT length penalty alpha for beam search", THE_RUNS)
    max_len_a: float | None = option(None, "A", "longest output = A * source tokens + B", THE_RUNS)
    max_len_b: int | None = option(None, "B", "(with max_len_a)", THE_RUNS)
    max_sentence_len: int | None = option(None, "N", "source tokens read; longer sentences are cut",
                                          "the run's data.max_sentence_len")
    scores: bool = option(False, "BOOL", "TSV lines: translation, score (mean log-probability per token), mark "
                          "(fine, check, likely wrong), flags (repeats, length, cut) and agreement (0-100, with the "
                          "beam's other hypotheses) of the least sure sentence")
    alignments: bool = option(False, "BOOL", "each line's word alignment after a tab, as its last field: source-"
                              "target word indices from 0 (Pharaoh format: 0-0 1-2), words as whitespace separates them")
    batch_size: int = option(64, "N", "sentences per batch (sorted by length within a chunk)")
    chunk_size: int = option(2000, "N", "lines read at a time from a stream: bounds the memory used")
    device: str = option("auto", "D", "auto | cpu | cuda")
    attention: str | None = option(None, "FILE", "the first sentence's attention: FILE.html = interactive explorer "
                                   "(every kind, layer, head); FILE.png, .svg or .pdf = cross-attention picture")
    attention_all: bool = option(False, "BOOL", "with a picture: every layer and head, plus both self-attentions")
    engine: str = option("ours", "E", "the search on the same weights: ours, ctranslate2 (RUN/ctranslate2, "
                         'exported first if missing; run= may name such a folder; pip install -e ".[export]") '
                         "or transformers (generate() on RUN/transformers, exported first if missing; pip "
                         'install -e ".[hub]"). Theirs divide a beam\'s score by length^A, not GNMT\'s '
                         "((5 + length) / 6)^A, so beams may rank differently when length_penalty > 0.")
    serve: ServeOptions = field(default_factory=ServeOptions, metadata={
        "metavar": "BOOL", "shown": "false", "help": "serve a page and a JSON API (POST /translate; docs at /docs) "
        'instead of translating; needs pip install -e ".[serve]"'})
    host: str = option("127.0.0.1", "H", "where to serve; 127.0.0.1 = this machine only")
    port: int = option(8000, "N", "the port to serve on")


def parse_args(argv: list[str]) -> tuple[TranslateConfig, list[str]]:
    """``key=value`` options (checked against TranslateConfig) and the sentences; everything after
    ``--`` is a sentence, ``=`` or not."""
    after = argv.index("--") if "--" in argv else len(argv)
    # serve=BOOL is serve.enabled: serve.* holds the server's own settings.
    options = [f"serve.enabled={a[6:]}" if a.startswith("serve=") else a for a in argv[:after] if OPTION.match(a)]
    sentences = [a for a in argv[:after] if not OPTION.match(a)] + argv[after + 1 :]
    try:
        return OmegaConf.to_object(OmegaConf.merge(TranslateConfig, OmegaConf.from_dotlist(options))), sentences
    except OmegaConfBaseException as error:
        raise SystemExit(f"translate.py: bad option: {str(error).splitlines()[0]} (see --help; a sentence "
                         f"with '=' goes after --)") from None
    except ValueError as error:  # the server's limits refuse what cannot work
        raise SystemExit(f"translate.py: {error}") from None


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
        if output.exists() and not output.is_file():  # a directory, a device, a FIFO (or a link to one)
            raise SystemExit(f"translate.py: output={cfg.output} is not a regular file: give a file or a new path")
        if reads_file and output.exists() and os.path.samefile(output, cfg.input):
            raise SystemExit(f"translate.py: output={cfg.output} is the input file: it would be overwritten")
    if cfg.attention:
        attention = Path(cfg.attention)
        if attention.suffix.lower() not in ATTENTION_SUFFIXES:
            raise SystemExit(f"translate.py: attention={cfg.attention} must end in one of "
                             f"{', '.join(ATTENTION_SUFFIXES)} (the explorer page, or a picture)")
        if not attention.parent.is_dir():
            raise SystemExit(f"translate.py: attention folder {attention.parent} does not exist")


def check_serving(cfg: TranslateConfig, sentences: list[str]) -> None:
    """serve=true: the server's own options only, and its libraries installed."""
    if sentences or cfg.input or cfg.output or cfg.attention:
        raise SystemExit("translate.py: serve=true takes no sentences, input=, output= or attention= "
                         "(the page and POST /translate take the sentences)")
    if not 0 < cfg.port < 65536:
        raise SystemExit(f"translate.py: port={cfg.port} must be between 1 and 65535")
    if not all(importlib.util.find_spec(package) for package in ("fastapi", "fastapi_offline", "uvicorn")):
        raise SystemExit("translate.py: serve=true needs FastAPI and uvicorn: pip install -e \".[serve]\"")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.format(options=options_help(TranslateConfig) + "\n" + options_help(Limits, "serve.")))
        return 0
    cfg, sentences = parse_args(argv)
    if not cfg.run:
        raise SystemExit("translate.py: run=PATH is required (a run folder from train.py); see --help")
    sizes = {"batch_size": cfg.batch_size, "chunk_size": cfg.chunk_size, "max_sentence_len": cfg.max_sentence_len}
    too_small = [f"{name}={value}" for name, value in sizes.items() if value is not None and value < 1]
    if too_small:
        raise SystemExit(f"translate.py: {', '.join(too_small)}: must be at least 1")
    check_paths(cfg, sentences)
    if cfg.serve.enabled:
        check_serving(cfg, sentences)
    # Warnings, ours and the libraries', one line each on stderr: stdout carries only translations.
    logging.basicConfig(format="translate.py: warning: %(message)s", level=logging.WARNING)
    from model.inference.run_folder import RunLoadError  # heavy imports after the argument checks
    from model.inference.translator import Translator

    overrides = {name: getattr(cfg, name) for name in SEARCH_OPTIONS if getattr(cfg, name) is not None}
    try:  # the run's settings (its config.yaml) with the command line's
        translator = Translator.load(cfg.run, cfg.device, cfg.engine, overrides=overrides)
    except (ValueError, RunLoadError) as error:
        raise SystemExit(f"translate.py: {error}") from None
    if cfg.serve.enabled:
        from serving.server import CannotServe, serve

        say = functools.partial(print, "translate.py:", flush=True)  # on stdout, at once: start and stop
        try:
            return serve(translator, cfg.host, cfg.port, cfg.serve, say)  # until Ctrl-C (130) or SIGTERM (143)
        except CannotServe as error:
            raise SystemExit(f"translate.py: {error}") from None
    return translate_lines(cfg, sentences, translator)


def translate_lines(cfg: TranslateConfig, sentences: list[str], translator: Translator) -> int:
    """The sentences, else the input's lines, translated to the output, chunk by chunk; then the warnings and
    the attention picture. Returns the exit code."""
    from data.atomic_file import atomic_file
    from data.lines import LineReader

    done, drawn, reader, cut = 0, None, None, []  # drawn: the translation whose attention is drawn; cut: lines
    # An output file is written beside its target and renamed at the end: never half-written. A
    # link to a file is written through: its target is replaced, the link stays.
    target = Path(cfg.output).resolve() if cfg.output else None
    partial = target.with_name(f"{target.name}.partial") if target else None
    try:
        with contextlib.ExitStack() as files:
            if sentences:
                lines: Iterable[str] = sentences
            else:
                stream = files.enter_context(open(cfg.input, "rb")) if cfg.input and cfg.input != "-" else sys.stdin.buffer
                if stream.isatty():  # someone typing: say what to type
                    pair = translator.settings.pair
                    print(f"translate.py: {pair.describe()}: type {pair.names[0]} sentences, one a line; Ctrl-D ends",
                          file=sys.stderr)
                lines = reader = LineReader(stream, max_bytes=4 * translator.max_source_chars)
            out = (files.enter_context(atomic_file(target, partial=partial, keep_on=(KeyboardInterrupt,)))
                   if target else sys.stdout)
            for chunk in chunks(lines, cfg.chunk_size, reader.waiting if reader else lambda: True):
                translations = translator.translate(chunk, batch_size=cfg.batch_size, alignments=cfg.alignments)
                if cfg.attention and drawn is None:  # the first non-empty line
                    drawn = next((t for t in translations if t.sentences), None)
                out.write("".join(output_line(t, cfg) + "\n" for t in translations))
                out.flush()
                cut += [done + n for n, t in enumerate(translations, 1) if t.cut]
                done += len(chunk)
    except KeyboardInterrupt:
        kept = f"; they are in {partial}" if partial else ""
        print(f"translate.py: interrupted after {done} line(s){kept}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `… | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error when Python flushes at exit
        return 0
    report(translator, reader, cut, cfg.scores)
    if drawn:
        draw_attention(translator, drawn, cfg.attention, cfg.attention_all)
    return 0


def output_line(translation: Translation, cfg: TranslateConfig) -> str:
    """The translation, its scores (``scores=true``) and its word alignment (``alignments=true``), tab-separated."""
    from model.inference.word_alignment import pharaoh

    line = translation.tsv() if cfg.scores else translation.text
    return f"{line}\t{pharaoh(translation.alignment)}" if cfg.alignments else line


def draw_attention(translator: Translator, drawn: Translation, path: str, every_layer: bool) -> None:
    """``.html``: the interactive explorer (every sentence of the line, kind, layer and head); else a PNG of the
    first sentence's cross-attention (last layer's heads), or with ``every_layer`` all layers plus
    ``<stem>_encoder_self.png`` and ``<stem>_decoder_self.png``. Each file written is named on stderr."""
    from model.views.explorer import sentence_record, write_explorer

    path, views = Path(path), [translator.sentence_view(sentence) for sentence in drawn.sentences]
    if path.suffix.lower() == ".html":
        steps = [{"label": "translation", "sentences": [sentence_record(view) for view in views]}]
        written = [write_explorer(path, steps, f"{drawn.source} → {drawn.text}")]
    else:
        from model.views import ATTENTION_TITLES
        from model.views.plotting import attention_figures, save_figure  # matplotlib: only for a picture

        kinds = tuple(ATTENTION_TITLES) if every_layer else ("cross",)
        caption = f": {views[0].source!r} → {views[0].translation!r}"
        figures = attention_figures(views[0], caption=caption, kinds=kinds, last_layer_only=not every_layer)
        written = [path if kind == "cross" else path.with_name(f"{path.stem}_{kind}{path.suffix}") for kind in figures]
        for figure, target in zip(figures.values(), written):
            save_figure(figure, target)
    for target in written:
        print(f"attention map written to {target}", file=sys.stderr)


def report(translator: Translator, reader, cut: list[int], scores: bool = False) -> None:
    """One warning per kind of input that was changed to be translatable; scores=true without marks."""
    from model.confidence import marks_caveat
    if scores and (caveat := marks_caveat(translator.calibration, translator.settings.search.beam_size)):
        logging.warning(caveat)
    if cut:
        shown = ", ".join(map(str, cut[:10])) + (f" and {len(cut) - 10} more" if len(cut) > 10 else "")
        logging.warning(f"{translator.truncated} sentence(s) longer than {translator.max_source_tokens} tokens, "
                        f"even cut at their inner punctuation, were truncated: line(s) {shown}")
    if reader is not None and reader.cut_lines:
        logging.warning(f"{reader.cut_lines} line(s) longer than {reader.max_bytes} bytes were cut there")
    if reader is not None and reader.invalid_lines:
        logging.warning(f"invalid UTF-8 in {reader.invalid_lines} line(s) was replaced with U+FFFD")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while the model loads: nothing was written yet
        sys.exit(130)
