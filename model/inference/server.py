"""A local translation server: one loaded run, a JSON API, a page, and concurrent requests batched together.

    python translate.py run=outputs/my_run serve=true            # http://127.0.0.1:8000/ (API docs: /docs)

``POST /translate`` with ``{"lines": [...], "beam_size": 5, "attention": false}`` answers
``{"translations": [...], "attention": null, "n_best": null}``: one translation per line, in order,
empty for an empty line; with ``"attention": true`` also the explorer's data for the first
non-empty line (the same data ``translate.py attention=x.html`` embeds), with ``"n_best": true``
every hypothesis the beam ended with for it, best first, with scores. Lines of all requests are
translated together in batches of similar length, oldest first (``Batcher``). No request names a
file: the server reads only the run it was started with.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from model.inference.batcher import Batcher
from model.inference.translator import Translation, Translator
from model.search import MAX_BEAM, SearchConfig
from model.views.explorer import TEMPLATE, explorer_data, sentence_record

MAX_LINES = 64  # lines in one request
MAX_LINE_CHARS = 2000  # characters in one line: far more than a sentence, a bounded cost
PAGE = Path(__file__).with_name("server_page.html")


class TranslateRequest(BaseModel):
    """What ``POST /translate`` takes."""

    model_config = ConfigDict(extra="forbid", strict=True)
    lines: list[str] = Field(max_length=MAX_LINES, description=f"at most {MAX_LINES} lines")
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM, description="1 = greedy; default: the run's")
    attention: bool = Field(False, description="also the explorer's data for the first non-empty line")
    n_best: bool = Field(False, description="also every hypothesis of the beam for the first non-empty line")


class Hypothesis(BaseModel):
    """One hypothesis of the beam: its text and its length-normalized log-probability."""

    translation: str
    score: float


class TranslateResponse(BaseModel):
    """What ``POST /translate`` answers."""

    translations: list[str]
    attention: dict | None = None
    n_best: list[Hypothesis] | None = None


def create_app(translator: Translator, search: SearchConfig, window: float = 0.01) -> FastAPI:
    """The app for one loaded run; ``search``: the default search (the run's, with the command line's)."""
    batcher = Batcher(translator, window)

    async def lifespan(app: FastAPI):
        worker = None
        if not batcher.running:  # no model loop yet (a test client): one on a thread of its own
            worker = threading.Thread(target=batcher.run, name="model", daemon=True)
            worker.start()
        yield
        batcher.stop()
        if worker is not None:
            worker.join()

    app = FastAPI(title="Attention, from scratch: English→Spanish", lifespan=lifespan,
                  description="Translate with a trained run; see the attention of a translation.")
    app.state.batcher = batcher

    @app.exception_handler(RequestValidationError)
    async def one_line(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first.get("type") == "json_invalid":  # its location is a character position
            where = "body"
        else:
            where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)

    @app.post("/translate", response_model=TranslateResponse)
    async def translate(request: TranslateRequest) -> TranslateResponse:
        """Translate lines, in order; an empty line stays empty."""
        too_long = [i for i, line in enumerate(request.lines) if len(line) > MAX_LINE_CHARS]
        if too_long:
            return JSONResponse({"error": f"lines.{too_long[0]}: longer than {MAX_LINE_CHARS} characters"},
                                status_code=413)
        config = search if request.beam_size is None else replace(search, beam_size=request.beam_size)
        results = await batcher.translate(request.lines, config)
        answer = TranslateResponse(translations=[t.text for t in results])
        first = next((t for t in results if t.src_ids), None)  # the first non-empty line
        if request.attention and first is not None:
            answer.attention = await batcher.call(lambda: attention_data(translator, first))
        if request.n_best and first is not None:
            hypotheses = await batcher.call(lambda: translator.n_best(first, config))
            answer.n_best = [Hypothesis(translation=text, score=score) for text, score in hypotheses]
        return answer

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        """The page: type English, see the Spanish and the attention that produced it."""
        defaults = {"beam_size": search.beam_size, "max_beam": MAX_BEAM}
        return (PAGE.read_text(encoding="utf-8")
                .replace("__DEFAULTS__", json.dumps(defaults))
                .replace("__EXPLORER__", json.dumps(TEMPLATE.read_text(encoding="utf-8")).replace("<", "\\u003c")))

    return app


def attention_data(translator: Translator, translation: Translation) -> dict:
    """The explorer's data for one translation: what ``translate.py attention=x.html`` embeds."""
    view = translator.sentence_view(translation)
    steps = [{"label": "translation", "sentences": [sentence_record(view)]}]
    return explorer_data(steps, f"{view.source} → {view.translation}")


def serve(translator: Translator, search: SearchConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until Ctrl-C: the web layer on a thread, the model's loop on this (the main) thread."""
    import uvicorn

    app = create_app(translator, search)
    batcher: Batcher = app.state.batcher
    batcher.running = True
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    web = threading.Thread(target=server.run, name="web", daemon=True)  # no signal handlers off the main thread
    web.start()
    while not server.started and web.is_alive():
        time.sleep(0.01)
    if not server.started:
        raise SystemExit(f"translate.py: cannot serve on {host}:{port} (in use, or not an address of this machine)")
    print(f"translate.py: serving on http://{host}:{port}/ (API docs: /docs); Ctrl-C stops", flush=True)
    try:
        batcher.run()
    except KeyboardInterrupt:
        pass
    finally:
        batcher.stop()
        server.should_exit = True
        web.join(timeout=5)
