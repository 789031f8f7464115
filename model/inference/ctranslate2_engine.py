"""Translating with CTranslate2 instead of our PyTorch search, on the same weights (``engine=ctranslate2``).

The run's own ``Translator`` still reads the lines (tokenizer, truncation, empty lines) and
recomputes the attention of a translation for exactly the ids CTranslate2 produced; only the
search runs in CTranslate2. Its length penalty divides the log-probability by length^alpha, where
ours uses GNMT's ((5 + length) / 6)^alpha: beam search with ``length_penalty > 0`` may rank
hypotheses differently. The output limit is per sentence, as ours: a · source length + b.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from model.inference.export import export_ctranslate2
from model.inference.run_folder import RunLoadError, find_checkpoint, run_folder_of
from model.inference.translator import Translation, Translator
from model.search import SearchConfig

EXPORT_FILE = "export.json"  # written by export_ctranslate2 beside the model: which checkpoint it holds


def is_exported_folder(path: Path) -> bool:
    return (path / "model.bin").is_file() and (path / EXPORT_FILE).is_file()


class CTranslate2Engine:
    """A ``Translator`` whose ``translate`` runs in CTranslate2; everything else is the translator's."""

    def __init__(self, translator: Translator, folder: Path, compute_type: str = "default") -> None:
        import ctranslate2

        self.translator = translator
        self.folder = folder
        self.engine = ctranslate2.Translator(str(folder), device=translator.device.type, compute_type=compute_type)
        tokenizer = translator.tokenizer
        self.pieces = [tokenizer.src.id_to_token(i) for i in range(tokenizer.src_vocab_size)]
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}

    @classmethod
    def load(cls, run: str | Path, device: str = "auto", compute_type: str = "default") -> "CTranslate2Engine":
        """``run``: a run folder or checkpoint (exported to ``<run>/ctranslate2`` first, with one line
        saying so, if missing or made from another checkpoint), or an exported folder itself."""
        run = Path(run)
        if is_exported_folder(run):
            folder = run
            checkpoint = Path(json.loads((run / EXPORT_FILE).read_text(encoding="utf-8"))["checkpoint"])
        else:
            checkpoint, _ = find_checkpoint(run)
            folder = run_folder_of(checkpoint) / "ctranslate2"
            made_from = (json.loads((folder / EXPORT_FILE).read_text(encoding="utf-8")).get("checkpoint")
                         if is_exported_folder(folder) else None)
            stale = made_from != str(checkpoint) or folder.joinpath("model.bin").stat().st_mtime < checkpoint.stat().st_mtime
            if made_from is None or stale:
                print(f"translate.py: exporting {checkpoint} to CTranslate2 in {folder}", file=sys.stderr)
                export_ctranslate2(checkpoint, folder)
        if not checkpoint.is_file():
            raise RunLoadError(f"{folder / EXPORT_FILE}: the checkpoint it was made from, {checkpoint}, is gone")
        return cls(Translator.load(checkpoint, device), folder, compute_type)

    def __getattr__(self, name: str):
        return getattr(self.translator, name)  # settings, encode, sentence_view, truncated, …

    def translate(self, lines: list[str], config: SearchConfig | None = None, batch_size: int = 64) -> list[Translation]:
        """As ``Translator.translate``, searched by CTranslate2."""
        config = config or self.translator.settings.search
        eos, limit = self.translator.tokenizer.eos_id, self.translator.model.max_len - 1
        results = [Translation("", "", [], []) for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        ids = self.translator.encode([lines[i].strip() for i in todo])
        # Sentences with one output limit go together: CTranslate2 takes one limit a batch.
        limits = [max(1, min(int(config.max_len_a * len(seq) + config.max_len_b), limit)) for seq in ids]
        order = sorted(range(len(todo)), key=lambda j: (limits[j], len(ids[j])))
        batches, current = [], []
        for j in order:
            if current and (len(current) == batch_size or limits[current[0]] != limits[j]):
                batches.append(current)
                current = []
            current.append(j)
        batches += [current] if current else []
        for batch in batches:
            answers = self.engine.translate_batch(
                [[self.pieces[i] for i in ids[j]] for j in batch], beam_size=config.beam_size,
                length_penalty=config.length_penalty, max_decoding_length=limits[batch[0]])
            for j, answer in zip(batch, answers):
                output = [self.ids[piece] for piece in answer.hypotheses[0]]
                output += [eos] if len(output) < limits[j] else []  # it ended (CTranslate2 drops the EOS)
                text = self.translator.tokenizer.decode_tgt([output])[0]
                results[todo[j]] = Translation(lines[todo[j]].strip(), " ".join(text.splitlines()), ids[j], output)
        return results
