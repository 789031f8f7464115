"""Byte-level BPE with Hugging Face ``tokenizers``: trained on the train split only.

Byte-level means every string can be encoded — accents, ñ, ¿ ¡, emoji, unseen scripts —
with no unknown token, and decoding gives the text back byte for byte, spacing included.
One joint English+Spanish vocabulary by default (so embeddings can be shared); separate
vocabularies as an option. Saved as ``tokenizer.json`` (joint) or
``tokenizer.src.json`` + ``tokenizer.tgt.json`` next to the checkpoints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0, 1, 2, 3
JOINT_FILE, SRC_FILE, TGT_FILE = "tokenizer.json", "tokenizer.src.json", "tokenizer.tgt.json"


def train_bpe(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2) -> Tokenizer:
    """Train a byte-level BPE tokenizer whose first ids are the special tokens."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: nothing is unknown
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


class TranslationTokenizer:
    """Source and target tokenizers (the same object for a joint vocabulary) and special ids."""

    def __init__(self, src: Tokenizer, tgt: Tokenizer | None = None) -> None:
        self.src, self.tgt = src, tgt or src
        self.joint = tgt is None or tgt is src
        ids = [self.tgt.token_to_id(t) for t in SPECIAL_TOKENS]
        if ids != [0, 1, 2, 3] or [self.src.token_to_id(t) for t in SPECIAL_TOKENS] != ids:
            raise ValueError(f"tokenizer special tokens must be {SPECIAL_TOKENS} with ids 0-3, got {ids}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = ids

    @classmethod
    def train(cls, pairs: Iterable[tuple[str, str]], vocab_size: int = 8000, joint: bool = True) -> "TranslationTokenizer":
        pairs = list(pairs)
        if joint:
            return cls(train_bpe([text for pair in pairs for text in pair], vocab_size))
        return cls(train_bpe([s for s, _ in pairs], vocab_size), train_bpe([t for _, t in pairs], vocab_size))

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_vocab_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_vocab_size()

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Source ids end with EOS: ``tokens + [eos]``."""
        return [e.ids + [self.eos_id] for e in self.src.encode_batch(texts)]

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        """Target ids without BOS/EOS; the collator adds them (decoder input / output)."""
        return [e.ids for e in self.tgt.encode_batch(texts)]

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return self.tgt.decode_batch(ids, skip_special_tokens=True)

    def src_tokens(self, text: str) -> list[str]:
        """Readable source pieces (plus EOS), for attention-map axes."""
        return [self._readable(self.src, i) for i in self.encode_src([text])[0]]

    def tgt_tokens(self, ids: list[int]) -> list[str]:
        return [self._readable(self.tgt, i) for i in ids]

    @staticmethod
    def _readable(tokenizer: Tokenizer, token_id: int) -> str:
        token = tokenizer.id_to_token(token_id)
        if token in SPECIAL_TOKENS:
            return token
        return tokenizer.decode([token_id]).replace(" ", "▁")  # byte-level 'Ġ' -> visible space

    def save(self, folder: str | os.PathLike) -> list[Path]:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.joint:
            self.src.save(str(folder / JOINT_FILE))
            return [folder / JOINT_FILE]
        self.src.save(str(folder / SRC_FILE))
        self.tgt.save(str(folder / TGT_FILE))
        return [folder / SRC_FILE, folder / TGT_FILE]

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "TranslationTokenizer":
        folder = Path(folder)
        if (folder / JOINT_FILE).is_file():
            return cls(Tokenizer.from_file(str(folder / JOINT_FILE)))
        if (folder / SRC_FILE).is_file() and (folder / TGT_FILE).is_file():
            return cls(Tokenizer.from_file(str(folder / SRC_FILE)), Tokenizer.from_file(str(folder / TGT_FILE)))
        raise FileNotFoundError(f"no tokenizer in {folder}: expected {JOINT_FILE} (or {SRC_FILE} + {TGT_FILE})")
