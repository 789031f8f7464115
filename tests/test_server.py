"""serving/server.py: the JSON API in-process (FastAPI's test client), requests batched together,
and a real server on a local port that Ctrl-C stops cleanly. (Its promises with a slow model: test_server_load.py.)"""

import math
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from helpers import ROOT, explorer_data, post, resident_kib, serving
from model.confidence import MARKS
from model.inference.translator import Translator
from model.search import SearchConfig
from serving.limits import Limits
from serving.server import MAX_LINE_CHARS, MAX_LINES, CannotServe, create_app, serve
from scripts.screenshot_explorer import save_full_page

SENTENCES = ["I like cats.", "Where is the station?", "Tom is very tall.", "It is late.", "The sky is blue."]


@pytest.fixture(scope="module")
def translator(smoke_run):
    return Translator.load(smoke_run)


@pytest.fixture(scope="module")
def client(translator):
    # A wide window: concurrent test requests surely meet in one batch.
    with TestClient(create_app(translator, Limits(window=0.2))) as client:
        yield client


def test_translations_in_order_and_empty_lines_stay_empty(client, translator):
    lines = ["Hello.", "", SENTENCES[0], "   ", SENTENCES[1]]
    answer = client.post("/translate", json={"lines": lines, "beam_size": 1})
    assert answer.status_code == 200
    expected = [t.text for t in translator.translate(lines, SearchConfig(beam_size=2).greedy)]
    reply = answer.json()
    assert reply.pop("confidence")[1] is None  # an empty line has none
    assert reply == {"translations": expected, "cut": [], "attention": None, "n_best": None, "alignments": None}
    assert expected[1] == expected[3] == ""


def test_each_line_comes_with_its_word_alignment_when_asked(client, translator):
    lines = ["- Tom is very tall. It is late.", "", "Note: I like cats."]
    reply = client.post("/translate", json={"lines": lines, "beam_size": 1, "alignments": True}).json()
    expected = translator.translate(lines, SearchConfig(beam_size=2).greedy, alignments=True)
    assert reply["translations"] == [t.text for t in expected]
    assert reply["alignments"] == [[list(pair) for pair in t.alignment] for t in expected] and expected[1].alignment == []
    assert {t for _, t in expected[0].alignment} == set(range(1, len(expected[0].text.split())))  # all but "-"


@pytest.mark.parametrize("nothing", ["- ", "1. ", "\u0007", "   "])
def test_the_n_best_and_attention_are_of_the_first_line_with_a_sentence(client, nothing):
    reply = client.post("/translate", json={"lines": [nothing], "n_best": True, "attention": True, "beam_size": 2})
    assert reply.status_code == 200 and reply.json()["n_best"] is None and reply.json()["attention"] is None
    reply = client.post("/translate", json={"lines": [nothing, "I like cats."], "n_best": True, "attention": True,
                                            "beam_size": 2}).json()
    assert reply["n_best"][0]["translation"] == reply["translations"][1]
    assert reply["attention"]["title"] == f"I like cats. → {reply['translations'][1]}"


def test_each_line_and_each_sentence_comes_with_its_confidence(client, translator):
    lines = ["Tom is very tall. It is late.", "I like cats."]
    line, single = client.post("/translate", json={"lines": lines, "beam_size": 1}).json()["confidence"]
    assert set(line) == {"score", "agreement", "mark", "flags", "sentences"} and line["mark"] in MARKS
    assert line["agreement"] is None  # greedy: no other hypotheses to agree with
    assert [s["source"] for s in line["sentences"]] == ["Tom is very tall.", "It is late."]
    for sentence in line["sentences"] + single["sentences"]:
        assert len(sentence["tokens"]) == len(sentence["probabilities"]) and sentence["mark"] in MARKS
        mean = sum(math.log(p) for p in sentence["probabilities"]) / len(sentence["probabilities"])
        assert sentence["score"] == pytest.approx(mean, abs=2e-3)  # the mean log-probability of its tokens
    ranks = {mark: rank for rank, mark in enumerate(MARKS)}
    worst = max(line["sentences"], key=lambda s: (ranks[s["mark"]], -s["score"]))
    assert (line["score"], line["mark"]) == (worst["score"], worst["mark"])  # a line is as sure as its least sure
    beam = client.post("/translate", json={"lines": lines, "beam_size": 2}).json()["confidence"]
    expected = translator.translate(lines, SearchConfig(beam_size=2))
    assert [s["agreement"] for line in beam for s in line["sentences"]] == pytest.approx(
        [s.confidence.agreement for t in expected for s in t.sentences], abs=1e-4)


def test_each_sentence_s_translation_is_found_in_its_line_as_the_page_looks_for_it(client):
    """A label read with a full stop, a line in capitals, a paragraph: the page underlines a doubtful sentence where
    its translation stands in the line, so each one must stand there as written."""
    lines = ["Thank you", "Open the door", "DO NOT ENTER. THE DOOR IS OPEN.", "Tom is tall. It is late."]
    answer = client.post("/translate", json={"lines": lines}).json()
    for line, confidence in zip(answer["translations"], answer["confidence"]):
        at = 0
        for sentence in confidence["sentences"]:
            found = line.find(sentence["translation"], at)  # in order, as written
            assert found >= 0, (line, sentence["translation"])
            at = found + len(sentence["translation"])


def test_a_pasted_paragraph_is_one_line_and_its_attention_holds_every_sentence(client, translator):
    lines = ["Tom is very tall. IT IS LATE. Where is the station?", "Hello. " + "word" * 300]
    answer = client.post("/translate", json={"lines": lines, "beam_size": 1, "attention": True}).json()
    expected = translator.translate(lines, SearchConfig(beam_size=1))
    assert answer["translations"] == [t.text for t in expected] and answer["cut"] == [1]
    records = answer["attention"]["steps"][0]["sentences"]
    assert [r["source"] for r in records] == ["Tom is very tall.", "It is late.", "Where is the station?"]


@pytest.mark.parametrize("body, status, message", [
    ("{not json", 422, "body: JSON decode error"),
    ({"lines": "one line"}, 422, "lines: Input should be a valid list"),
    ({"lines": [1, 2]}, 422, "lines.0: Input should be a valid string"),
    ({"lines": ["Hi."], "beam_size": 0}, 422, "beam_size: Input should be greater than or equal to 1"),
    ({"lines": ["Hi."], "beam_size": 65}, 422, "beam_size: Input should be less than or equal to 64"),
    ({"lines": ["Hi."], "beam_size": "5"}, 422, "beam_size: Input should be a valid integer"),
    ({"lines": ["Hi."], "file": "/etc/passwd"}, 422, "file: Extra inputs are not permitted"),
    ({"lines": ["Hi."] * (MAX_LINES + 1)}, 422, f"lines: List should have at most {MAX_LINES} items"),
    ({"lines": ["Hi.", "x" * (MAX_LINE_CHARS + 1)]}, 413, f"lines.1: longer than {MAX_LINE_CHARS} characters"),
])
def test_bad_requests_are_a_4xx_with_one_line(client, body, status, message):
    kwargs = {"content": body, "headers": {"Content-Type": "application/json"}} if isinstance(body, str) else {"json": body}
    answer = client.post("/translate", **kwargs)
    assert answer.status_code == status and answer.json()["error"].startswith(message), answer.json()
    assert "\n" not in answer.json()["error"]
    assert client.post("/translate", json={"lines": ["Still here."]}).status_code == 200  # the server goes on


def test_the_attention_is_what_translate_py_draws(client, smoke_run, tmp_path):
    page = tmp_path / "sky.html"
    result = subprocess.run([sys.executable, str(ROOT / "translate.py"), f"run={smoke_run}", "The sky is blue.",
                             f"attention={page}", "beam_size=2"], cwd=ROOT, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    answer = client.post("/translate", json={"lines": ["", "The sky is blue."], "beam_size": 2, "attention": True})
    assert answer.json()["attention"] == explorer_data(page)  # the first non-empty line, the same search


def test_the_n_best_of_the_first_line_starts_with_its_translation(client, translator):
    answer = client.post("/translate", json={"lines": ["", "Where is the station?"], "beam_size": 3, "n_best": True})
    hypotheses = answer.json()["n_best"]
    assert len(hypotheses) == 3 and hypotheses[0]["translation"] == answer.json()["translations"][1]
    assert [h["score"] for h in hypotheses] == sorted((h["score"] for h in hypotheses), reverse=True)
    assert answer.json()["attention"] is None  # only what was asked for
    for line in ("Kitchen", "WHERE IS THE STATION?"):  # each written as in the line: a heading's stop dropped, capitals
        answer = client.post("/translate", json={"lines": [line], "beam_size": 3, "n_best": True}).json()
        texts = [h["translation"] for h in answer["n_best"]]
        assert texts[0] == answer["translations"][0] and (line != line.upper() or texts == [t.upper() for t in texts])
    for line in ("Hi\t`a\tb`", "Go to [the page. Now](http://x.y) please."):  # markup set aside: not a 500
        assert client.post("/translate", json={"lines": [line], "n_best": True}).status_code == 200


def test_concurrent_requests_share_batches_and_get_their_own_answers(client, translator):
    batcher = client.app.state.batcher
    expected = {line: t.text for line, t in zip(SENTENCES, translator.translate(SENTENCES, SearchConfig(beam_size=2)))}
    before = batcher.batches
    requests = [SENTENCES[i % len(SENTENCES)] for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda line: client.post("/translate", json={"lines": [line]}).json(), requests))
    assert [a["translations"] for a in answers] == [[expected[line]] for line in requests]  # never mixed
    assert batcher.batches - before < 16  # gathered: fewer model batches than requests


def test_a_request_that_leaves_changes_nothing_for_the_others(translator):
    import asyncio
    import threading

    from serving.batcher import Batcher

    config = SearchConfig(beam_size=2)
    expected = [t.text for t in translator.translate(SENTENCES, config)]
    batcher = Batcher(translator, Limits(window=0.1), rate=1e9)
    model = threading.Thread(target=batcher.run)
    model.start()

    async def scenario() -> list[str]:
        deadline = time.monotonic() + 60
        leaving = batcher.submit(["I leave before the answer."], config, [10], deadline)
        staying = [batcher.submit([line], config, [10], deadline) for line in SENTENCES]
        leaving.future.cancel()  # the client disconnects while its request waits
        answers = await asyncio.gather(*(job.future for job in staying))
        return [answer[0].text for answer in answers]

    try:
        assert asyncio.run(scenario()) == expected
    finally:
        batcher.stop()
        model.join()
    assert batcher.batches == 1  # the line of the request that left was never translated


def test_the_page_is_self_contained(client):
    page = client.get("/").text
    assert "__DEFAULTS__" not in page and "__EXPLORER__" not in page and "attention-data" in page
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page  # nothing fetched


def test_a_real_server_answers_on_localhost_and_ctrl_c_stops_it(smoke_run):
    with serving(smoke_run) as (port, ended, _):
        assert len(post(port, {"lines": ["Hello."]})["translations"]) == 1
    code, stdout, stderr = ended
    assert code in (0, 130) and b"Traceback" not in stderr, stderr.decode()
    assert f"serving on http://127.0.0.1:{port}/".encode() in stdout


def test_a_port_in_use_is_one_error_and_nothing_is_served(translator):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = []
        with pytest.raises(CannotServe, match=f"cannot serve on 127.0.0.1:{port} \\(in use"):
            serve(translator, port=port, say=said.append)
    assert said == []  # it never said it was serving


def test_a_bounded_load_gets_every_answer_right(smoke_run, translator):
    # 16 clients x 20 requests against 127.0.0.1 only; the server's memory after it as after a warm-up.
    expected = {line: t.text for line, t in zip(SENTENCES, translator.translate(SENTENCES, SearchConfig(beam_size=1)))}
    with serving(smoke_run) as (port, ended, process):
        def client(number: int) -> list[bool]:
            lines = [SENTENCES[(number + i) % len(SENTENCES)] for i in range(20)]
            return [post(port, {"lines": [line], "beam_size": 1})["translations"] == [expected[line]] for line in lines]

        with ThreadPoolExecutor(16) as pool:
            warm = list(pool.map(client, range(16)))
            memory = resident_kib(process.pid)
            loaded = list(pool.map(client, range(16)))
        assert all(all(answers) for answers in warm + loaded)  # 640 answers, each its own request's
        assert resident_kib(process.pid) < 1.25 * memory  # flat: the second round holds on to nothing
    assert ended[0] in (0, 130)


def test_the_server_searches_with_ctranslate2_when_asked(smoke_run, translator, tmp_path):
    # engine= for serve=true: the same pipeline, CTranslate2's search (greedy: our very outputs).
    expected = [t.text for t in translator.translate(SENTENCES, SearchConfig(beam_size=1))]
    run = tmp_path / "run"  # exported into: the shared run stays as it is
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*"))
    with serving(run, "engine=ctranslate2") as (port, ended, _):
        assert post(port, {"lines": SENTENCES, "beam_size": 1})["translations"] == expected
        n_best = post(port, {"lines": ["I like cats."], "beam_size": 3, "n_best": True})["n_best"]
        assert len(n_best) == 3
    assert ended[0] in (0, 130) and (run / "ctranslate2" / "model.bin").is_file()


def test_the_page_in_a_real_browser(browser, smoke_run, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(smoke_run) as (port, _, _):
        pasted = "The sky is blue. I like cats."  # two sentences: the explorer lets the reader pick one
        expected = post(port, {"lines": [pasted], "beam_size": 2, "attention": True, "alignments": True})
        browser.get(f"http://127.0.0.1:{port}/")
        text = browser.find_element(By.ID, "text")
        text.clear()
        text.send_keys(pasted + "\n")  # Enter translates
        item = WebDriverWait(browser, 60).until(expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "#translations li b")))
        assert item.text == expected["translations"][0]
        badge = browser.find_element(By.CSS_SELECTOR, "#translations li .badge")  # the line's mark, its score on hover
        assert badge.text == expected["confidence"][0]["mark"] and "score" in badge.get_attribute("title")
        assert "agreement" in badge.get_attribute("title")  # beam 2: the other hypothesis agrees, or not
        for target in (0, len(item.text.split()) - 1):  # a translated word under the pointer lights the source words it is aligned with
            word = browser.find_element(By.CSS_SELECTOR, f'#translations li b span.word[data-t="{target}"]')
            ActionChains(browser).move_to_element(word).perform()
            lit = browser.execute_script("return [...document.querySelectorAll('#translations li span.word.lit')]"
                                         ".map(w => w.dataset.s === undefined ? 't' + w.dataset.t : +w.dataset.s)")
            assert lit == [s for s, t in expected["alignments"][0] if t == target] + [f"t{target}"]
        save_full_page(browser, tmp_path / "aligned.png")
        browser.find_element(By.ID, "tint").click()  # the tokens, tinted by their probability
        tokens = browser.find_elements(By.CSS_SELECTOR, "#translations li span.token")
        assert [t.get_attribute("title") for t in tokens] == [
            f"{token}: {p:.3f}" for s in expected["confidence"][0]["sentences"]
            for token, p in zip(s["tokens"], s["probabilities"])]
        browser.switch_to.frame(browser.find_element(By.ID, "explorer"))
        WebDriverWait(browser, 30).until(expected_conditions.presence_of_element_located((By.ID, "model-view")))
        browser.find_element(By.CSS_SELECTOR, '#model-view canvas[data-layer="0"][data-head="1"]').click()
        shown = {(q, k): w for q, k, w in browser.execute_script(
            "return [...document.querySelectorAll('#detail td')].map(td => [+td.dataset.q, +td.dataset.k, +td.dataset.w])")}
        weights = expected["attention"]["steps"][0]["sentences"][0]["maps"]["cross"][0][1]  # layer 1, head 2
        assert shown and all(abs(w - weights[q][k] / 1000) < 1e-9 for (q, k), w in shown.items())
        picker = browser.find_element(By.ID, "sentence")
        assert picker.is_displayed() and [o.text for o in picker.find_elements(By.TAG_NAME, "option")] == [
            "The sky is blue.", "I like cats."]
        picker.find_elements(By.TAG_NAME, "option")[1].click()
        browser.find_element(By.CSS_SELECTOR, '#model-view canvas[data-layer="0"][data-head="1"]').click()
        shown = {(q, k): w for q, k, w in browser.execute_script(
            "return [...document.querySelectorAll('#detail td')].map(td => [+td.dataset.q, +td.dataset.k, +td.dataset.w])")}
        weights = expected["attention"]["steps"][0]["sentences"][1]["maps"]["cross"][0][1]  # the second sentence's
        assert shown and all(abs(w - weights[q][k] / 1000) < 1e-9 for (q, k), w in shown.items())
        browser.switch_to.default_content()
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        hosts = browser.execute_script("return performance.getEntriesByType('resource').map(r => new URL(r.name).host)")
        assert set(hosts) <= {f"127.0.0.1:{port}"}  # nothing fetched from anywhere else
        save_full_page(browser, tmp_path / "server.png")
        assert (tmp_path / "server.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        browser.get(f"http://127.0.0.1:{port}/docs")  # the interactive API page, offline: nothing fetched elsewhere
        path = WebDriverWait(browser, 60).until(expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, ".opblock-summary-path")))
        assert path.text.replace("\u200b", "") == "/translate"
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        hosts = browser.execute_script("return performance.getEntriesByType('resource').map(r => new URL(r.name).host)")
        assert set(hosts) <= {f"127.0.0.1:{port}"}
        save_full_page(browser, tmp_path / "docs.png")


def test_serving_options_are_checked_before_loading():
    for args, message in ((["serve=true", "Hi."], "serve=true takes no sentences"), (["serve=true", "port=0"], "port=0"),
                          (["serve=true", "serve.max_work=0"], "serve.max_work=0: must be above 0"),
                          (["serve=true", "serve.deadline=soon"], "bad option: Value 'soon' of type 'str' could not be converted to Float")):
        result = subprocess.run([sys.executable, str(ROOT / "translate.py"), "run=does-not-matter", *args], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode != 0 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_the_limits_help_names_are_the_servers_defaults():
    from dataclasses import asdict

    help_text = subprocess.run([sys.executable, str(ROOT / "translate.py"), "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=120).stdout
    for name, value in asdict(Limits()).items():
        line = next(line for line in help_text.splitlines() if line.strip().startswith(f"serve.{name}="))
        assert line.rstrip().endswith(f"[{value:.12g}]"), line
    with pytest.raises(ValueError, match="serve.read_time=0: must be above 0"):
        Limits(read_time=0)
