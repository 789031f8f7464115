"""A trained run, loaded for translating: lines in, ``Translation``s out, and the attention of any sentence.

The one inference pipeline, for every entry and engine: each line normalized, its markup set aside, cut into sentences
(``data/``), searched in batches (``search_backends.py``) with the run's settings unless the caller overrides them,
joined back, its markup put back by the word alignment (``word_alignment.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from data.lines import clean_text, normalized
from data.markup import put_back, set_aside
from data.sentences import LineSplitter, translate_pieces, translated_at
from data.tokenizer import TranslationTokenizer, truncate_source
from model.confidence import MARKS, Calibration, Confidence, beam_agreements, confidence
from model.inference.run_folder import (RunFiles, RunSettings, open_run, overridden, read_calibration, run_model,
                                        run_tokenizer)
from model.inference.search_backends import CTranslate2Search, OurSearch, TransformersSearch, check_engine
from model.inference.word_alignment import attention_links, line_alignment, sentence_links
from model.search import Attending, KeepRows, SearchConfig, sentence_attention
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView, sentence_view
from model.views.alignment import Links


@dataclass
class Sentence:
    """One sentence of a line (or a label, or a part of an over-long sentence) as the model read and wrote it."""

    source: str  # the sentence the model read (in sentence case where the line was in capitals), before truecasing
    text: str  # its translation (copy slots filled), before the line's capitals are given back
    src_ids: list[int]  # as the model read them (truncated, ending in EOS)
    output_ids: list[int]  # as the search produced them (EOS included when it ended)
    confidence: Confidence  # how sure the model was, and whether to check it (``model/confidence.py``)
    token_log_probs: list[float] | None = None  # of each output id (None: the engine gives only the total)
    links: Links | None = None  # (source word, target word) of ``source`` and ``text``, when alignments were asked
    attention: torch.Tensor | None = None  # (output ids, source ids): the cross-attention our search kept for them


@dataclass
class Translation:
    """One input line translated: its sentences, and their translations joined back into one line."""

    source: str  # the line, normalized and stripped ("" for an empty line)
    text: str  # the translation, one line in the run's target language
    sentences: list[Sentence] = field(default_factory=list)  # in the line's order; [] for an empty line
    alignment: list[tuple[int, int]] | None = None  # (source, target) words of the line, when asked (Pharaoh's)

    @property
    def cut(self) -> bool:
        """A sentence of the line was truncated to the model's source length."""
        return any(sentence.confidence.cut for sentence in self.sentences)

    def tsv(self) -> str:
        """translation<TAB>score<TAB>mark<TAB>flags<TAB>agreement: the line's confidence beside it (empty fields
        when unknown; the agreement last, so that the first four columns read as they always did)."""
        found = self.confidence
        if found is None:
            return self.text + "\t\t\t\t"
        score, agreement = ("" if value is None else f"{value:.{digits}f}"
                            for value, digits in ((found.score, 3), (found.agreement, 1)))
        return "\t".join([self.text.replace("\t", " "), score, found.mark or "", ",".join(found.flags), agreement])

    @property
    def confidence(self) -> Confidence | None:
        """The line's: its least sure sentence's (the one that decides whether to check the line); None if empty.
        Within a mark, the lowest combined figure decides, else the lowest score (a line's sentences, searched
        alike, all have the one or the other)."""
        order = {None: -1, **{mark: rank for rank, mark in enumerate(MARKS)}}
        return min((s.confidence for s in self.sentences), default=None,
                   key=lambda c: (-order[c.mark], next((x for x in (c.combined, c.score) if x is not None), 0.0)))


@dataclass
class Translator:
    """A model, its tokenizer, the run's settings (with the caller's), a device, and the search that translates."""

    model: Seq2SeqTransformer
    tokenizer: TranslationTokenizer
    device: torch.device
    backend: OurSearch | CTranslate2Search | TransformersSearch = field(repr=False)  # the search
    settings: RunSettings = RunSettings()
    files: RunFiles | None = None  # where the weights were read from (an export is made from them)
    calibration: Calibration | None = None  # where its marks change (None: a run from before; flags alone mark)
    truncated: int = 0  # sources cut to the length limit so far
    aligned: tuple[int, int] | None = None  # the head trained to align words (decoder layer, head, from 0), if any

    @classmethod
    def load(cls, run: str | Path, device: str = "auto", engine: str = "ours", compute_type: str = "default",
             overrides: dict | None = None, calibrated: bool = True) -> "Translator":
        """A run folder (its final, else best, else last checkpoint), one of its ``.ckpt`` files, or (for
        ``engine="ctranslate2"``) a folder exported from one; searched by ``engine`` (``ENGINES``). The
        checkpoint is read once. ``overrides``: settings instead of the run's own (``overridden``);
        ``calibrated=False``: its ``confidence.json`` left unread (what ``scripts/calibrate.py`` writes again)."""
        check_engine(engine)
        run, exported = Path(run), None
        if engine == "ctranslate2":
            from model.inference.export import exported_checkpoint

            if checkpoint := exported_checkpoint(run):  # the weights for the attention and the tokenizer: its run's
                exported, run = run, checkpoint
        files, state = open_run(run)
        settings = overridden(files.settings, overrides or {})
        tokenizer = run_tokenizer(files, state)
        target = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
        model = run_model(files, state).to(target).eval()
        aligned = tuple(state["aligned_head"]) if state.get("aligned_head") else None
        if engine == "ours":
            backend = OurSearch(model, tokenizer.bos_id, tokenizer.eos_id)
        elif engine == "ctranslate2":
            backend = CTranslate2Search(model, tokenizer, files, exported, target, compute_type, aligned)
        else:  # transformers: generate() on <run>/transformers
            backend = TransformersSearch(model, tokenizer, files, settings, target)
        calibration = read_calibration(files.folder) if calibrated else None
        return cls(model, tokenizer, target, backend, settings, files, calibration, aligned=aligned)

    @property
    def max_source_tokens(self) -> int:
        """The run's ``data.max_sentence_len`` (what it was trained on), never above the model's positions."""
        return self.settings.source_limit(self.model.max_len)

    @property
    def max_source_chars(self) -> int:
        """Characters kept of a line before tokenizing: far more than fit the model, bounded memory."""
        return 16 * self.max_source_tokens

    @property
    def splitter(self) -> LineSplitter:
        """How a line of the run's source language is cut into sentences and put back in its target language."""
        pair = self.settings.pair
        return LineSplitter(pair.source, pair.target, self.tokenizer, self.fits)

    def fits(self, text: str) -> bool:
        """``text`` is read whole: no more source tokens than ``max_source_tokens`` (EOS and the leading space
        included; a text of fewer bytes always fits, as byte-level BPE never makes more tokens than bytes)."""
        limit = self.max_source_tokens
        return len(text.encode()) + self.tokenizer.spaced < limit or len(self._source_ids([text])[0]) <= limit

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids, truncated to the length limit (EOS kept); counted in ``self.truncated``."""
        return [truncate_source(seq, self.max_source_tokens) for seq in self._counted(self._source_ids(texts))]

    def _counted(self, ids: list[list[int]]) -> list[list[int]]:
        """``ids`` as they are, those longer than the model reads counted in ``self.truncated``."""
        self.truncated += sum(len(seq) > self.max_source_tokens for seq in ids)
        return ids

    def source_tokens(self, lines: list[str]) -> list[int]:
        """How many source tokens the model would read of each line, all its sentences (0 for an empty line):
        what its search costs. Counted on the whole line, as cheap as tokenizing it (a server asks on every
        request): its sentences hold the same tokens, each read up to ``max_source_tokens``."""
        texts, splitter = [normalized(line).strip() for line in lines], self.splitter
        return [min(len(ids), self.max_source_tokens * splitter.sentence_count(text)) if text else 0
                for ids, text in zip(self._source_ids(texts), texts)]

    def _source_ids(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids of each text, cut to ``max_source_chars`` and cleaned, before truncation."""
        return self.tokenizer.encode_src([clean_text(text[: self.max_source_chars]) for text in texts])

    def text(self, output_ids: list[list[int]], sources: list[str]) -> list[str]:
        """Target-language text of output ids, one line each (byte-level BPE can spell a line break); copy slots
        filled from the ``sources`` they were translated from."""
        return [" ".join(text.splitlines()) for text in self.tokenizer.decode_tgt(output_ids, sources)]

    @torch.no_grad()
    def translate(self, lines: list[str], config: SearchConfig | None = None, batch_size: int = 64,
                  keep_rows: KeepRows | None = None, scores: bool = True, alignments: bool = False) -> list[Translation]:
        """Translate lines with ``config`` (default: the run's search), one translation per line: every sentence
        of the call (each distinct one once) in batches of similar length, joined back into its line; empty
        lines stay empty. ``keep_rows``: which lines to keep translating, asked at every step of our search
        (``model.search.KeepRows``); ``scores=False``: the search keeps no log-probabilities (flags only);
        ``alignments``: each line's word alignment (``word_alignment.py``)."""
        config, splitter = config or self.settings.search, self.splitter
        lines = [normalized(line) for line in lines]
        aside = [set_aside(line) for line in lines]  # what the model reads: the markup set aside
        pieces = [splitter.pieces(line.plain) for line in aside]
        owners: dict[str, list[int]] = {}  # the lines each distinct sentence is in
        for row, line_pieces in enumerate(pieces):
            for piece in filter(lambda piece: piece.translated, line_pieces):
                owners.setdefault(piece.model_text, []).append(row)

        aligning = alignments or any(line.markup for line in aside)  # then the search keeps where it looked

        def search(texts: list[str]) -> list[Sentence]:  # a sentence is wanted while any of its lines is
            wanted = regrouped(keep_rows, [owners[text] for text in texts])
            return self._translate_sentences(texts, config, batch_size, wanted, scores,
                                              (self.aligned or "averaged") if aligning else None)

        translated = translate_pieces(pieces, search)
        translations = [Translation(line.plain.strip(), splitter.join(line_pieces, [s.text for s in found]).rstrip()
                                    if found else "", found)
                        for line, line_pieces, found in zip(aside, pieces, translated)]
        self.align(translations if alignments else [t for t, line in zip(translations, aside) if line.markup],
                   batch_size)
        for translation, line, pasted in zip(translations, aside, lines):
            if line.markup:  # put back by the alignment, which is then in the pasted line's words
                translation.text, translation.alignment = put_back(line, translation.text, translation.alignment)
                translation.source = pasted.strip()
        return translations

    def _translate_sentences(self, texts: list[str], config: SearchConfig, batch_size: int,
                             keep_rows: KeepRows | None, scores: bool, attention: Attending) -> list[Sentence]:
        """Sentences searched in batches of similar length, answered in their order."""
        whole = self._counted(self._source_ids(texts))
        cut = [len(seq) > self.max_source_tokens for seq in whole]
        ids = [truncate_source(seq, self.max_source_tokens) for seq in whole]
        results: list[Sentence | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda j: len(ids[j]))  # similar lengths batch together
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            kept = regrouped(keep_rows, [[j] for j in batch])
            outputs = self.backend.search([ids[j] for j in batch], config, kept, scores, attention)
            texts_out = self.text([output.ids for output in outputs], [texts[j] for j in batch])
            found = beam_agreements(outputs, self.tokenizer.decode_tgt)  # as training calibrated them: slots unfilled
            for j, output, text, agreement in zip(batch, outputs, texts_out, found):
                results[j] = Sentence(texts[j], text, ids[j], output.ids, confidence(
                    ids[j], output, self.tokenizer.eos_id, cut[j], self.calibration, agreement), output.token_log_probs,
                    attention=output.attention)
        return results

    def align(self, translations: list[Translation], batch_size: int = 64) -> None:
        """Each translation's ``alignment`` (where it has none yet: a line with markup has its own): its words (as
        whitespace separates them in its line and in its text) linked by the cross-attention of the ids its search
        produced, read by our model whatever the engine (``word_alignment.py``); its sentences' ``links`` in their
        own words."""
        translations = [translation for translation in translations if translation.alignment is None]
        sentences = list({id(s): s for t in translations for s in t.sentences}.values())  # a repeated one once
        tok = self.tokenizer
        for sentence in filter(lambda s: s.attention is not None, sentences):  # where our search looked
            sentence.links = attention_links(sentence.attention, sentence.src_ids, sentence.output_ids, tok.src,
                                             tok.tgt, tok.eos_id)
        sentences = sorted((s for s in sentences if s.links is None), key=lambda s: len(s.src_ids))  # the others
        for start in range(0, len(sentences), batch_size):  # in one pass each batch, of similar lengths
            batch = sentences[start : start + batch_size]
            found = sentence_links(self.model, tok.src, tok.tgt, [(s.src_ids, s.output_ids) for s in batch],
                                   tok.bos_id, tok.eos_id, self.aligned)
            for sentence, links in zip(batch, found):
                sentence.links = links
        splitter = self.splitter
        for translation in translations:  # its pieces again (the same cut), to place each sentence's words
            pieces = splitter.pieces(translation.source)
            text, placed = splitter.placed(pieces, [s.text for s in translation.sentences])
            translation.alignment = line_alignment((translation.source, translated_at(pieces)), (text, placed),
                                                   [s.links for s in translation.sentences])

    @torch.no_grad()
    def n_best(self, translation: Translation, config: SearchConfig | None = None) -> list[tuple[str, float]]:
        """The beam's hypotheses for the line's first sentence or label, best first (its translation), with their
        scores (ours: the length-normalized log-probability), as they stand in the line (no added stop or markup)."""
        sentence, others = translation.sentences[0], [s.text for s in translation.sentences[1:]]
        hypotheses = self.backend.hypotheses(sentence.src_ids, config or self.settings.search)
        texts = self.text([ids for ids, _ in hypotheses], [sentence.source] * len(hypotheses))
        pieces = self.splitter.pieces(set_aside(translation.source).plain)  # the line as translated: no markup
        return [(self.splitter.placed(pieces, [text, *others])[1][0][1], score)
                for text, (_, score) in zip(texts, hypotheses, strict=True)]

    def confidence_record(self, translation: Translation) -> dict | None:
        """A line's confidence in plain values (the server's JSON): its own, and each sentence's (its translation as
        it stands in the line, capitals and a label's dropped stop included, so that a page finds it there) with the
        model's probability of each output token (None for an empty line)."""
        if translation.confidence is None:
            return None
        _, placed = self.splitter.placed(self.splitter.pieces(set_aside(translation.source).plain),
                                         [s.text for s in translation.sentences])

        def record(found: Confidence) -> dict:
            rounded = {name: None if value is None else round(value, 4)
                       for name, value in (("score", found.score), ("agreement", found.agreement))}
            return {**rounded, "mark": found.mark, "flags": found.flags}

        sentences = [{"source": s.source, "translation": written, **record(s.confidence),
                      "tokens": self.tokenizer.tgt_tokens(s.output_ids), "probabilities": None
                      if s.token_log_probs is None else [round(math.exp(lp), 4) for lp in s.token_log_probs]}
                     for s, (_, written) in zip(translation.sentences, placed, strict=True)]
        return {**record(translation.confidence), "sentences": sentences}

    def sentence_view(self, sentence: Sentence) -> SentenceView:
        """Every attention weight of one sentence, for exactly the ids its search produced (by any engine)."""
        attention = sentence_attention(self.model, sentence.src_ids, sentence.output_ids, self.tokenizer.bos_id)
        return sentence_view(attention, self.tokenizer.src_tokens, self.tokenizer.tgt_tokens, sentence.source,
                             sentence.text, self.settings.pair.names, sentence.token_log_probs)


def regrouped(keep_rows: KeepRows | None, groups: list[list[int]]) -> KeepRows | None:
    """``keep_rows`` asked for each group of its rows: whether any of them is kept (None stays None)."""
    if keep_rows is None:
        return None

    def asked() -> list[bool]:
        flags = keep_rows()
        return [any(flags[row] for row in group) for group in groups]

    return asked
