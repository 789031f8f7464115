"""model/views/explorer.py and explorer.html: the payload, and the page in a real headless browser."""

from decimal import ROUND_HALF_UP, Decimal

import torch

from helpers import explorer_data
from model.search import SentenceAttention
from model.transformer import AttentionMaps
from model.views import SentenceView
from model.views.explorer import explorer_html, read_steps, sentence_record, write_explorer
from scripts.screenshot_explorer import save_full_page


def random_sentence(src=4, out=3, layers=2, heads=3, seed=0) -> SentenceAttention:
    generator = torch.Generator().manual_seed(seed)

    def maps(q, k, causal=False):
        scores = torch.randn(heads, q, k, generator=generator)
        if causal:
            scores = scores.masked_fill(torch.ones(q, k, dtype=torch.bool).triu(1), float("-inf"))
        return [scores.softmax(-1) for _ in range(layers)]

    return SentenceAttention(list(range(src)), list(range(out)), list(range(out)),
                             AttentionMaps(maps(src, src), maps(out, out, causal=True), maps(out, src)))


def test_embedded_weights_parse_back_to_the_maps(tmp_path):
    sentence = random_sentence()
    src, inputs, outputs = ["¿Dónde", "▁</script>", "▁niño", "<eos>"], ["<bos>", "¡Hola", "!"], ["¡Hola", "!", "<eos>"]
    record = sentence_record(SentenceView(sentence, src, inputs, outputs, "¿Dónde </script> niño", "¡Hola!"))
    page = write_explorer(tmp_path / "page.html", [{"label": "one", "sentences": [record]}], "a <title>")
    assert page.read_text(encoding="utf-8").count("</script>") == 2  # the token did not end the data block
    data = explorer_data(page)
    got = data["steps"][0]["sentences"][0]
    assert (got["src"], got["inputs"], got["outputs"]) == (src, inputs, outputs)
    for kind in ("encoder_self", "decoder_self", "cross"):
        for layer, expected in zip(got["maps"][kind], getattr(sentence.maps, kind)):
            weights = torch.tensor(layer) / 1000
            assert (weights - expected).abs().max() <= 5e-4 + 1e-7  # rounded to 3 decimals
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=weights.size(-1) * 5e-4)
    assert "a &lt;title&gt;" in page.read_text(encoding="utf-8") and data["title"] == "a <title>"


def test_steps_are_read_back_in_order(tmp_path):
    import json

    for step in (200, 40, 1000):
        (tmp_path / f"step_{step:06d}").mkdir()
        (tmp_path / f"step_{step:06d}" / "attention.json").write_text(json.dumps({"label": f"step {step}"}))
    assert [s["label"] for s in read_steps(tmp_path)] == ["step 40", "step 200", "step 1000"]
    assert "__DATA__" not in explorer_html([], "empty") and "__TITLE__" not in explorer_html([], "empty")


def js_two_decimals(w: float) -> str:
    """``w.toFixed(2).replace(/^0/, "")`` as the page writes it: an exact tie (0.125) rounds up, where
    Python's format would round it to even."""
    return str(Decimal(w).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)).lstrip("0")


def cell_weights(browser) -> dict[tuple[int, int], float]:
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#detail td')].map(td => [+td.dataset.q, +td.dataset.k, +td.dataset.w])")
    return {(q, k): w for q, k, w in cells}


def test_the_page_in_a_real_browser(browser, smoke_run, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains

    page = smoke_run / "attention" / "explorer.html"
    data = explorer_data(page)
    assert [s["label"] for s in data["steps"]] == ["step 30", "step 60"]  # every validation so far
    browser.get(page.resolve().as_uri())
    last = data["steps"][-1]["sentences"][0]

    # Click layer 1, head 2 in the model view: the large view shows exactly that head's weights.
    browser.find_element("css selector", '#model-view canvas[data-layer="0"][data-head="1"]').click()
    expected = last["maps"]["cross"][0][1]
    shown = cell_weights(browser)
    assert len(shown) == len(last["outputs"]) * len(last["src"])
    assert all(abs(w - expected[q][k] / 1000) < 1e-9 for (q, k), w in shown.items())

    # Under each cross-attention head, its AER on the everyday gold set at this validation; a line says what it is.
    alignment = data["steps"][-1]["alignment"]
    labels = browser.execute_script("return [...document.querySelectorAll('#model-view .aer')].map(e => e.textContent)")
    heads = len(alignment["by_head"][0])
    assert [float(label.removeprefix("AER ")) for label in labels] == [
        rate for layer, rates in enumerate(alignment["by_head"]) for rate in [*rates, alignment["by_layer"][layer]]]
    assert heads == 2
    note = browser.find_element("css selector", "#alignment-note").text
    assert f"{alignment['pairs']} hand-aligned everyday sentence pairs" in note and "not why" in browser.page_source

    # Hover output token 1: its row lights up, each cell showing its weight, the strongest listed.
    ActionChains(browser).move_to_element(browser.find_element("css selector", '#detail th.q[data-q="1"]')).perform()
    lit = browser.execute_script("return [...document.querySelectorAll('#detail td.hl')].map(td => [+td.dataset.k, td.textContent])")
    assert [k for k, _ in lit] == list(range(len(last["src"])))
    assert all(text == js_two_decimals(expected[1][k] / 1000) for k, text in lit)
    info = browser.find_element("css selector", "#info").text
    assert info.startswith(f"{last['outputs'][1]} attends to:")
    assert f"{max(expected[1]) / 1000:.3f}" in info

    # The step slider goes back to the first validation: the maps change with it.
    browser.execute_script("const s = document.getElementById('step'); s.value = 0; s.dispatchEvent(new Event('input'))")
    first = data["steps"][0]["sentences"][0]["maps"]["cross"][0][1]
    earlier = cell_weights(browser)
    assert all(abs(w - first[q][k] / 1000) < 1e-9 for (q, k), w in earlier.items()) and earlier != shown
    assert browser.find_element("css selector", "#step-label").text == "step 30"

    # Nothing went wrong, and nothing left the page.
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    save_full_page(browser, tmp_path / "explorer.png")
    assert (tmp_path / "explorer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_model_without_cross_attention_shows_the_other_two_kinds(browser, tmp_path):
    sentence = random_sentence()
    sentence.maps.cross = []  # the cross_attention=false ablation
    record = sentence_record(SentenceView(sentence, list("abcd"), list("xyz"), list("xyz"), "abcd", "xyz"))
    assert set(record["maps"]) == {"encoder_self", "decoder_self"}
    page = write_explorer(tmp_path / "page.html", [{"label": "one", "sentences": [record]}], "no cross")
    browser.get(page.resolve().as_uri())
    tabs = [b.get_attribute("data-kind") for b in browser.find_elements("css selector", "#kinds button")]
    assert tabs == ["encoder_self", "decoder_self"]
    assert len(browser.find_elements("css selector", "#detail td")) == 4 * 4  # the first kind, encoder self
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
