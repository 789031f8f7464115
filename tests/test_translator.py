"""model/inference/translator.py: translating with a loaded run, and the attention of one translation."""

import shutil

import pytest
import torch

from data.sampler import pad_batch
from data.sentences import ended_as
from helpers import sequence_log_prob
from model.inference.translator import Translator
from model.inference.word_alignment import sentence_links
from model.search import SearchConfig, beam_search, greedy_decode, length_penalty_factor, search

SENTENCES = ["I like cats.", "Where is the station?", "Tom is very tall.", "It is late."]


def test_beam_never_below_greedy_on_trained_run(smoke_run):
    translator = Translator.load(smoke_run)
    tok = translator.tokenizer
    ids = translator.encode(SENTENCES)
    src = pad_batch(ids, tok.pad_id)
    greedy = greedy_decode(translator.model, src, tok.bos_id, tok.eos_id).tokens
    one = beam_search(translator.model, src, tok.bos_id, tok.eos_id, SearchConfig(beam_size=1)).tokens
    assert torch.equal(one, greedy)
    lengths = (greedy != tok.pad_id).sum(1).float()
    greedy_score = sequence_log_prob(translator.model, src, greedy, tok.bos_id) / length_penalty_factor(lengths, 0.6)
    _, beam_score, *_ = beam_search(translator.model, src, tok.bos_id, tok.eos_id, SearchConfig(beam_size=5, length_penalty=0.6))
    assert torch.all(beam_score >= greedy_score - 1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translations_carry_the_ids_their_attention_is_computed_for(smoke_run, beam_size):
    translator = Translator.load(smoke_run)
    tok, config = translator.tokenizer, SearchConfig(beam_size=beam_size)
    lines = ["", *SENTENCES[:2], "   ", *SENTENCES[2:]]
    translations = translator.translate(lines, config)  # one batch: the output length limit is the same
    assert [t.source for t in translations] == [line.strip() for line in lines]
    assert translations[0].text == translations[3].text == "" and translations[0].sentences == []  # empty stays empty
    ids = translator.encode(SENTENCES)
    outputs = [o.ids for o in search(translator.model, pad_batch(ids, tok.pad_id), tok.bos_id, tok.eos_id, config)]
    real = [t for t in translations if t.source]
    assert [t.sentences[0].src_ids for t in real] == ids and [t.sentences[0].output_ids for t in real] == outputs  # the same search, batched
    assert [t.text for t in real] == tok.decode_tgt(outputs, SENTENCES)  # slots filled from the sources
    view = translator.sentence_view(real[1].sentences[0])
    sentence = view.attention
    assert sentence.src_ids == ids[1] and sentence.output_ids == outputs[1]
    assert sentence.input_ids == [tok.bos_id] + outputs[1][:-1]
    assert (view.src_tokens, view.output_tokens) == (tok.src_tokens(ids[1]), tok.tgt_tokens(outputs[1]))
    assert (view.source, view.translation) == (SENTENCES[1], real[1].text)
    assert sentence.maps.cross[0].shape[1:] == (len(outputs[1]), len(ids[1]))


def test_the_runs_search_is_the_default(smoke_run):
    translator = Translator.load(smoke_run)
    assert translator.settings.search == SearchConfig(beam_size=2)  # experiment=smoke's module.search
    default = [t.text for t in translator.translate(SENTENCES)]
    assert default == [t.text for t in translator.translate(SENTENCES, SearchConfig(beam_size=2))]


def test_encode_truncates_long_sources_keeping_eos(smoke_run):
    # A million characters are cut before tokenizing (bounded time and memory), then to the run's
    # data.max_sentence_len tokens.
    translator = Translator.load(smoke_run)
    ids = translator.encode(["word " * 400, "Short.", "x" * 10**6])
    assert translator.truncated == 2 and len(ids[0]) == len(ids[2]) == translator.max_source_tokens
    assert ids[0][-1] == translator.tokenizer.eos_id and len(ids[1]) < 10

def test_a_pasted_line_is_translated_sentence_by_sentence_and_joined_back(smoke_run):
    translator, config = Translator.load(smoke_run), SearchConfig(beam_size=1)
    line, caps, label, decomposed, composed = translator.translate(
        ["Tom is very tall. It is late.  Where is the station?", "IT IS LATE.", "2. Attention: I like cats.",
         "Jose\u0301 is here.", "José is here."], config)
    alone = [t.text for t in translator.translate(["Tom is very tall.", "It is late.", "Where is the station?",
                                                    "Attention", "I like cats."], config)]
    assert [s.source for s in line.sentences] == ["Tom is very tall.", "It is late.", "Where is the station?"]
    assert line.text == f"{alone[0]} {alone[1]}  {alone[2]}"  # the line's own spacing
    assert caps.sentences[0].source == "It is late." and caps.text == alone[1].upper()
    assert label.text == f"2. {ended_as('Attention', alone[3])}: {alone[4]}"  # the marker kept, the label its own
    assert decomposed.text == composed.text and decomposed.source == "José is here."  # NFC at the door


def test_an_over_long_sentence_is_cut_at_its_commas_and_only_what_cannot_be_is_truncated(smoke_run):
    translator = Translator.load(smoke_run, overrides={"max_sentence_len": 12})
    commas, word = translator.translate(["I like cats, I like dogs, I like the birds, and I like the sea.",
                                         "word" * 40 + "."], SearchConfig(beam_size=1))
    assert len(commas.sentences) > 1 and not commas.cut
    assert all(len(s.src_ids) <= 12 for s in commas.sentences) and commas.text.count(",") >= len(commas.sentences) - 1
    assert word.cut and translator.truncated == 1 and len(word.sentences[0].src_ids) == 12  # the word alone


def test_markup_is_set_aside_for_the_model_and_put_back_by_the_alignment(smoke_run):
    translator, config = Translator.load(smoke_run), SearchConfig(beam_size=1)
    lines = ["Press **Save** to keep `notes.txt`.", "See [the guide](https://example.org/a) now.", "2 * 3 = 6", ""]
    found = translator.translate(lines, config)
    plain = translator.translate(["Press Save to keep CODE1.", "See the guide now.", "2 * 3 = 6", ""], config)
    assert [t.source for t in found] == lines  # as pasted
    assert "`notes.txt`" in found[0].text and "CODE1" not in found[0].text  # copied whole, never translated
    assert found[0].text.replace("**", "").replace("`notes.txt`", "CODE1") == plain[0].text  # the same translation
    assert found[1].text.replace("](https://example.org/a)", "").replace("[", "") == plain[1].text
    assert found[2].text == plain[2].text and found[3].text == ""  # no markup: as it was
    aligned = translator.translate(lines, config, alignments=True)
    assert [t.text for t in aligned] == [t.text for t in found] and found[0].alignment == aligned[0].alignment
    assert all(s < len(line.split()) and t < len(a.text.split()) for line, a in zip(lines, aligned)
               for s, t in a.alignment)  # in the words of the pasted line and of what is printed


def test_a_run_with_an_aligned_head_reads_its_alignments_there(smoke_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2", "transformers", "attention"))
    checkpoint = Translator.load(run).files.checkpoint
    state = torch.load(checkpoint, weights_only=True)
    state["aligned_head"] = (0, 1)  # as training saves it: decoder layer, head, from 0
    torch.save(state, checkpoint)
    translator = Translator.load(run)
    sentence = translator.translate(["Where is the station?"], SearchConfig(beam_size=1), alignments=True)[0].sentences[0]
    tok = translator.tokenizer
    read = sentence_links(translator.model, tok.src, tok.tgt, [(sentence.src_ids, sentence.output_ids)], tok.bos_id,
                          tok.eos_id, (0, 1))[0]
    assert translator.aligned == (0, 1) and sentence.attention is not None  # kept by the search as it went
    assert sentence.links == read  # the same links as one teacher-forced pass reads


def test_a_line_with_markup_gets_its_confidence_and_n_best_from_the_pieces_it_was_translated_in(smoke_run):
    translator, config = Translator.load(smoke_run), SearchConfig(beam_size=2)
    for line in ("Hi\t`a\tb`", "Go to [the page. Now](http://x.y) please.", "**Note**: Keep your ticket."):
        translation = translator.translate([line], config)[0]
        assert translation.source == line  # the pasted line, markup and all; the model read it without
        record = translator.confidence_record(translation)
        assert [s["source"] for s in record["sentences"]] == [s.source for s in translation.sentences]
        assert len(translator.n_best(translation, config)) == 2
