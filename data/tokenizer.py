"""Byte-level BPE with Hugging Face ``tokenizers``: trained on the train split only.

Byte-level means every string can be encoded — accents, ñ, ¿ ¡, emoji, unseen scripts —
with no unknown token, and decoding gives the text back byte for byte, spacing included.
One joint vocabulary for the source and target languages by default (so embeddings can be shared); separate
vocabularies as an option. With copy slots (``data/copy_slots.py``), names and numbers are slot
tokens of their own. Saved as ``tokenizer.json`` (joint) or ``tokenizer.src.json`` +
``tokenizer.tgt.json``, ``copy_slots.json`` and ``truecase.json``, next to the checkpoints.

One spelling per word: every line is read with a leading space, as a word inside a sentence stands (" Kitchen"
alone as in "the kitchen" reads ``Ġkitchen``, the way SentencePiece writes "▁"), and its first word in the case
the training split writes it inside sentences (``data/truecase.py``); writing a translation drops the space
(the decoder's ``Strip``, in tokenizer.json) and gives the first letter back its capital. A tokenizer trained
before reads lines as they are: its tokenizer.json has no ``Strip``, its folder no ``truecase.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from data.copy_slots import FILE as SLOTS_FILE
from data.copy_slots import SLOT_TOKENS, CopySlots
from data.in_processes import in_processes
from data.truecase import FILE as TRUECASE_FILE
from data.truecase import Truecaser

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0, 1, 2, 3
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)  # every byte is a symbol of byte-level BPE, plus the specials
JOINT_FILE, SRC_FILE, TGT_FILE = "tokenizer.json", "tokenizer.src.json", "tokenizer.tgt.json"


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE spells each byte as one printable character (GPT-2's table); this inverts it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + n): b for n, b in enumerate(others)}


BYTE_DECODER = _byte_decoder()
WORD_START = "▁"  # shown for a token's leading space: where a word begins


def readable_tokens(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    """Labels for a sequence of byte-level BPE ids: real characters (``ñ``, ``¿``), never byte codes.

    A character whose UTF-8 bytes are split across tokens is shown on the token where it
    starts; a token holding only the rest of a character is shown as ``·``.
    """
    pieces = [""] * len(ids)
    data, owner = bytearray(), []  # the bytes of the sequence, and which token each came from
    for i, token_id in enumerate(ids):
        token = tokenizer.id_to_token(token_id)
        if token is None or token in SPECIAL_TOKENS:
            pieces[i] = token or "<unk>"
            continue
        data += bytes(BYTE_DECODER[c] for c in token)
        owner += [i] * len(token)
    start = 0
    while start < len(data):  # one UTF-8 character at a time, credited to its first byte's token
        lead = data[start]
        length = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        pieces[owner[start]] += bytes(data[start : start + length]).decode("utf-8", errors="replace")
        start += length
    return [piece.replace(" ", WORD_START) if piece else "·" for piece in pieces]


def truncate_source(ids: list[int], limit: int) -> list[int]:
    """Cut source ids (which end with EOS) to ``limit`` tokens, keeping the EOS."""
    return ids if len(ids) <= limit else ids[: limit - 1] + ids[-1:]


def tokenizer_fingerprint(folder: str | os.PathLike) -> str:
    """sha256 of the tokenizer file(s) in ``folder``: stored in checkpoints so a mismatch is caught."""
    folder = Path(folder)
    files = [folder / JOINT_FILE] if (folder / JOINT_FILE).is_file() else [folder / SRC_FILE, folder / TGT_FILE]
    files += [folder / name for name in (SLOTS_FILE, TRUECASE_FILE) if (folder / name).is_file()]
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()


def reads_spaced(tokenizer: Tokenizer) -> bool:
    """``tokenizer`` reads every line with a leading space: its decoder drops one (``train_bpe``'s since then)."""
    decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
    return any(step.get("type") == "Strip" for step in decoder.get("decoders") or [])


def train_bpe(texts: Sequence[str], vocab_size: int = 8000, min_frequency: int = 2,
              split_digits: bool = False, slot_tokens: list[str] = ()) -> Tokenizer:
    """Train a byte-level BPE tokenizer whose first ids are the special tokens and last ids ``slot_tokens``
    (``vocab_size`` in all). ``split_digits``: every digit a token of its own, so that "530" and "531" share
    two tokens and copying a number is copying digits (BPE would merge digit strings into arbitrary pieces)."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                               if split_digits else byte_level)
    # The line's leading space is ours to add (``TranslationTokenizer``), not the pre-tokenizer's: ByteLevel's
    # add_prefix_space would add one after every slot token too ("<name1>!" read as "<name1> !").
    tokenizer.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(slot_tokens),
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: nothing is unknown
        show_progress=sys.stderr.isatty(),  # (its bars, with the time left, in a terminal; in a log, blank lines)
    )
    tokenizer.train_from_iterator((f" {text}" for text in texts), trainer=trainer, length=len(texts))
    tokenizer.add_tokens([AddedToken(token, normalized=False) for token in slot_tokens])  # kept when decoding
    return tokenizer


def read_as_the_model_does(truecaser: Truecaser, slots: CopySlots | None,
                           pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Training ``pairs`` as the model reads them: each side's first word in its usual case, and with ``slots``
    what both sides hold verbatim as slot tokens."""
    pairs = [(truecaser.truecased(s, "src"), truecaser.truecased(t, "tgt")) for s, t in pairs]
    if not slots:
        return pairs
    return [(slots.mask(s, held), slots.mask(t, held)) for s, t in pairs for held in [slots.pair_slots(s, t)]]


class TranslationTokenizer:
    """Source and target tokenizers (the same object for a joint vocabulary), special ids, copy slots."""

    def __init__(self, src: Tokenizer, tgt: Tokenizer | None = None, slots: CopySlots | None = None,
                 truecaser: Truecaser | None = None) -> None:
        self.src, self.tgt, self.slots, self.truecaser = src, tgt or src, slots, truecaser
        self.joint = tgt is None or tgt is src
        self.spaced = reads_spaced(self.src)  # every line read with a leading space (as tokenizer.json says)
        ids = [self.tgt.token_to_id(t) for t in SPECIAL_TOKENS]
        if ids != [0, 1, 2, 3] or [self.src.token_to_id(t) for t in SPECIAL_TOKENS] != ids:
            raise ValueError(f"tokenizer special tokens must be {SPECIAL_TOKENS} with ids 0-3, got {ids}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = ids

    @classmethod
    def train(cls, pairs: Iterable[tuple[str, str]], vocab_size: int = 8000, joint: bool = True,
              split_digits: bool = False, copy_slots: bool = False) -> "TranslationTokenizer":
        pairs = list(pairs)
        slots = CopySlots.learn(pairs) if copy_slots else None
        truecaser = Truecaser.learn(pairs)
        # BPE learns the text the model will read: first words in their usual case, slots for names and numbers
        pairs = [pair for part in in_processes(partial(read_as_the_model_does, truecaser, slots), pairs,
                                               "reading the sample as the model does") for pair in part]
        options = {"split_digits": split_digits, "slot_tokens": SLOT_TOKENS if slots else []}
        if joint:
            return cls(train_bpe([text for pair in pairs for text in pair], vocab_size, **options), None, slots,
                       truecaser)
        return cls(train_bpe([s for s, _ in pairs], vocab_size, **options),
                   train_bpe([t for _, t in pairs], vocab_size, **options), slots, truecaser)

    def for_nfc_text(self) -> "TranslationTokenizer":
        """This tokenizer for text in Unicode NFC already (what the corpus readers give): the same ids, without the
        NFC pass of each line again (a fifth of BPE's time on a corpus of millions)."""
        def without_nfc(tokenizer: Tokenizer) -> Tokenizer:
            if (json.loads(tokenizer.to_str()).get("normalizer") or {}).get("type") != "NFC":
                return tokenizer  # (another normalizer: kept)
            copy = Tokenizer.from_str(tokenizer.to_str())
            copy.normalizer = None
            return copy
        src = without_nfc(self.src)
        return TranslationTokenizer(src, None if self.joint else without_nfc(self.tgt), self.slots, self.truecaser)

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_vocab_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_vocab_size()

    def truecased(self, texts: list[str], side: str = "src") -> list[str]:
        """``texts`` as the model reads them: each one's first word in its usual case (``data/truecase.py``)."""
        return [self.truecaser.truecased(text, side) for text in texts] if self.truecaser else texts

    def _encoded(self, tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
        """Ids of ``texts``, each read with a leading space where the tokenizer was trained so."""
        return [e.ids for e in tokenizer.encode_batch([f" {text}" for text in texts] if self.spaced else texts)]

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Source ids end with EOS: ``tokens + [eos]``; with copy slots, every name and number a slot."""
        texts = self.truecased(texts)
        if self.slots:
            texts = [self.slots.mask(text, self.slots.entities(text)) for text in texts]
        return [ids + [self.eos_id] for ids in self._encoded(self.src, texts)]

    def capitalized_inside(self, word: str) -> bool:
        """Inside a sentence the training text writes ``word`` (``Tom``, ``London``) capitalized: a name its
        pairs copy, or a word the BPE spells in fewer pieces capitalized than in lower case (a frequent form
        is one piece: " London", " could"), or a one-letter word the pairs hold capitalized inside a sentence
        ("I"; a frequent word is one piece either way, and then lower case is the likelier). How a line in capitals is read in sentence case (``data/casing.py``)."""
        if self.slots and word in self.slots.copied:
            return True
        capitalized, lower = (len(e.ids) for e in self.src.encode_batch([f" {word}", f" {word.lower()}"]))
        inside = self.slots is not None and word in (self.slots.translated_inside or ())
        return capitalized < lower or (capitalized == lower and inside and len(word) == 1)

    def written_lower(self, word: str) -> bool:
        """``word``, typed in capitals, is one the training text writes in lower case: the BPE spells it in fewer
        pieces lowered (" STOP" against " stop"), where an acronym the text holds in capitals (" USA") is not."""
        shouted, lower = (len(e.ids) for e in self.src.encode_batch([f" {word}", f" {word.lower()}"]))
        return lower < shouted

    def knows(self, word: str) -> bool:
        """The training pairs hold ``word`` in any case (without copy slots: any word, as far as can be told)."""
        return self.slots.knows(word) if self.slots else True

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        """Target ids without BOS/EOS (the collator adds them: decoder input / output) of ``texts`` as the model
        writes them: a training target's first word is truecased by ``encode_pairs``, not here."""
        return self._encoded(self.tgt, texts)

    def encode_pairs(self, sources: list[str], targets: list[str], training: bool) -> tuple[list, list]:
        """Source and target ids of pairs. Copy slots: a training pair's for what both sides hold verbatim,
        an evaluation pair's for every name and number of its source, as in translation."""
        sources, targets = self.truecased(sources), self.truecased(targets, "tgt")
        if self.slots:
            held = [self.slots.pair_slots(s, t if training else None) for s, t in zip(sources, targets)]
            targets = [self.slots.mask(t, slots) for t, slots in zip(targets, held)]
            sources = [self.slots.mask(s, slots) for s, slots in zip(sources, held)]
        return [ids + [self.eos_id] for ids in self._encoded(self.src, sources)], self.encode_tgt(targets)

    def decode_tgt(self, ids: list[list[int]], sources: list[str] | None = None) -> list[str]:
        """Target text; given the ``sources``, each slot replaced by what it stands for and the first letter
        capitalized where the source's is."""
        texts = self.tgt.decode_batch(ids, skip_special_tokens=True)
        if sources is None:
            return texts
        if self.slots:
            truecased = self.truecased(sources)  # the slots' entities as the model read the source
            texts = [self.slots.restore(text, self.slots.entities(src), src) for text, src in zip(texts, truecased)]
        return [Truecaser.recapitalized(text, src) for text, src in zip(texts, sources)] if self.truecaser else texts

    def src_tokens(self, ids: list[int]) -> list[str]:
        """Readable source pieces of ``ids``, for attention-map axes."""
        return readable_tokens(self.src, ids)

    def tgt_tokens(self, ids: list[int]) -> list[str]:
        """Readable target pieces of ``ids``, for attention-map axes."""
        return readable_tokens(self.tgt, ids)

    def save(self, folder: str | os.PathLike) -> list[Path]:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        files = {JOINT_FILE: self.src} if self.joint else {SRC_FILE: self.src, TGT_FILE: self.tgt}
        for name, tokenizer in files.items():
            tokenizer.save(str(folder / name))
        return [folder / name for name in files] + [part.save(folder) for part in (self.slots, self.truecaser) if part]

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "TranslationTokenizer":
        folder = Path(folder)
        slots, truecaser = CopySlots.load(folder), Truecaser.load(folder)  # None: trained without them
        if (folder / JOINT_FILE).is_file():
            return cls(Tokenizer.from_file(str(folder / JOINT_FILE)), None, slots, truecaser)
        if (folder / SRC_FILE).is_file() and (folder / TGT_FILE).is_file():
            return cls(Tokenizer.from_file(str(folder / SRC_FILE)), Tokenizer.from_file(str(folder / TGT_FILE)), slots,
                       truecaser)
        raise FileNotFoundError(f"no tokenizer in {folder}: expected {JOINT_FILE} (or {SRC_FILE} + {TGT_FILE})")
