"""A local translation server: one loaded run, a JSON API, a page, and concurrent requests batched together.

    python translate.py run=outputs/my_run serve=true            # http://127.0.0.1:8000/ (API docs: /docs)

``POST /translate`` with ``{"lines": [...], "beam_size": 5, "attention": false}`` answers
``{"translations": [...], "attention": null, "n_best": null}``: one translation per line, in order,
empty for an empty line; with ``"attention": true`` also the explorer's data for the first
non-empty line (the same data ``translate.py attention=x.html`` embeds), with ``"n_best": true``
every hypothesis the beam ended with for it, best first, with scores. Requests that arrive within ``window``
seconds of each other are translated as one batch. No request names a file: the server reads
only the run it was started with.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

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


@dataclass
class _Job:
    lines: list[str]
    config: SearchConfig
    future: asyncio.Future


@dataclass
class Batcher:
    """Gathers the requests of ``window`` seconds (up to ``max_lines`` lines) into model batches, one per
    search setting, and hands each request its own translations. One worker: the model runs one batch
    at a time, in a thread, while the server keeps accepting requests."""

    translator: Translator
    window: float = 0.01
    max_lines: int = 256
    batches: int = 0  # model batches run so far
    lock: threading.Lock = field(default_factory=threading.Lock)  # the model, one user at a time
    _queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    async def translate(self, lines: list[str], config: SearchConfig) -> list[Translation]:
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Job(lines, config, future))
        return await future

    async def run(self) -> None:
        """The worker: wait for a request, gather what follows within the window, translate."""
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self._queue.get()]
            deadline = loop.time() + self.window
            while sum(len(job.lines) for job in jobs) < self.max_lines and (wait := deadline - loop.time()) > 0:
                try:
                    jobs.append(await asyncio.wait_for(self._queue.get(), wait))
                except asyncio.TimeoutError:
                    break
            for config in dict.fromkeys(job.config for job in jobs):  # one batch per search setting
                await self._run_batch([job for job in jobs if job.config == config], config)

    async def _run_batch(self, jobs: list[_Job], config: SearchConfig) -> None:
        lines = [line for job in jobs for line in job.lines]
        try:
            results = await asyncio.to_thread(self._translate, lines, config)
        except Exception as error:  # noqa: BLE001 — every waiting request gets the error, the server goes on
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(error)
            return
        self.batches += 1
        start = 0
        for job in jobs:  # each request gets exactly its own lines back, in order
            if not job.future.done():  # a client that left is simply not answered
                job.future.set_result(results[start : start + len(job.lines)])
            start += len(job.lines)

    def _translate(self, lines: list[str], config: SearchConfig) -> list[Translation]:
        with self.lock:
            return self.translator.translate(lines, config, batch_size=len(lines) or 1)

    def n_best(self, translation: Translation, config: SearchConfig) -> list[tuple[str, float]]:
        with self.lock:
            return self.translator.n_best(translation, config)


def create_app(translator: Translator, search: SearchConfig, window: float = 0.01) -> FastAPI:
    """The app for one loaded run; ``search``: the default search (the run's, with the command line's)."""
    batcher = Batcher(translator, window)

    async def lifespan(app: FastAPI):
        worker = asyncio.create_task(batcher.run())
        yield
        worker.cancel()

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
            answer.attention = await asyncio.to_thread(attention_data, batcher, first)
        if request.n_best and first is not None:
            hypotheses = await asyncio.to_thread(batcher.n_best, first, config)
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


def attention_data(batcher: Batcher, translation: Translation) -> dict:
    """The explorer's data for one translation: what ``translate.py attention=x.html`` embeds."""
    with batcher.lock:
        view = batcher.translator.sentence_view(translation)
    steps = [{"label": "translation", "sentences": [sentence_record(view)]}]
    return explorer_data(steps, f"{view.source} → {view.translation}")


def serve(translator: Translator, search: SearchConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until Ctrl-C (uvicorn shuts down cleanly)."""
    import uvicorn

    print(f"translate.py: serving on http://{host}:{port}/ (API docs: /docs); Ctrl-C stops", flush=True)
    uvicorn.run(create_app(translator, search), host=host, port=port, log_level="warning")
