"""How well a trained run's tokenizer covers a new corpus, said before a fine-tune trains: pieces per word on the
new training pairs against the corpus the tokenizer was trained on (more pieces: words it never learned to write
whole), and the characters that corpus never held (written byte by byte, never seen by the model)."""

from __future__ import annotations

from collections.abc import Sequence

from data.languages import word_count


def pieces_per_word(texts: Sequence[str], ids: Sequence[Sequence[int]], extra: int = 0) -> float:
    """Tokens per word of ``texts`` (``word_count``: a character of Chinese or Thai is one; ``extra``: tokens each
    ``ids`` row holds besides the text's, e.g. 1 for a source's EOS)."""
    words = sum(map(word_count, texts))
    return sum(len(row) - extra for row in ids) / max(words, 1)


def coverage_line(new: dict[str, Sequence], original: dict[str, Sequence]) -> str:
    """One line comparing ``new`` with ``original`` (each: ``src``, ``tgt`` texts and ``src_ids``, ``tgt_ids``)."""
    def rate(side: dict[str, Sequence], name: str) -> float:
        return pieces_per_word(side[name], side[f"{name}_ids"], extra=1 if name == "src" else 0)

    rates = ", ".join(f"{name} {rate(new, name):.2f} (original {rate(original, name):.2f})" for name in ("src", "tgt"))
    seen = {ch for text in (*original["src"], *original["tgt"]) for ch in text}
    unseen = sorted({ch for text in (*new["src"], *new["tgt"]) for ch in text} - seen)
    shown = " ".join(unseen[:20]) + (" …" if len(unseen) > 20 else "")
    return (f"tokenizer coverage of the new corpus: pieces per word {rates}; "
            f"{len(unseen)} characters the original never held{': ' + shown if unseen else ''}")
