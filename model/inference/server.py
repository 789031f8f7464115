"""A local translation server: one loaded run, a JSON API, a page, and concurrent requests batched together.

    python translate.py run=outputs/my_run serve=true            # http://127.0.0.1:8000/ (API docs: /docs)

``POST /translate`` with ``{"lines": [...], "beam_size": 5, "attention": false}`` answers
``{"translations": [...], "attention": null, "n_best": null}``: one translation per line, in order,
empty for an empty line; with ``"attention": true`` also the explorer's data for the first
non-empty line (the same data ``translate.py attention=x.html`` embeds), with ``"n_best": true``
every hypothesis the beam ended with for it, best first, with scores. Requests take turns in shared
model batches (``batcher.py``). No request names a file: the server reads only the run it was started with.

Every request's work is bounded: source tokens × beam width (plus its n-best and attention) up to
``serve.max_work``, else 413; more than ``serve.queue_work`` waiting: 503 with ``Retry-After``; past
``serve.deadline`` seconds: 504, its work dropped, as when its client leaves. Bodies are bounded before
they are read and, on a loopback address, only this machine's names are answered (``guard.py``).
Ctrl-C or SIGTERM: new requests refused, the running batch dropped, exit 130 or 143 within seconds.
"""

from __future__ import annotations

import asyncio
import html
import json
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from model.inference.batcher import Batcher, Job, Overloaded, ServerStopping
from model.inference.guard import Guard, is_loopback, loopback_hosts
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


@dataclass(frozen=True)
class Limits:
    """What one request may cost and how long it may take (``translate.py``'s ``serve.*`` options)."""

    max_work: int = 8192  # source tokens × beam width of one request (+ its n-best and attention)
    batch_work: int = 2048  # of one model batch: a long request's lines take turns with others'
    queue_work: int = 65536  # waiting at once; beyond it new requests get 503
    deadline: float = 30.0  # seconds a request may wait and run
    max_body: int = 1_000_000  # bytes of a request's body
    window: float = 0.01  # seconds to wait for more lines when a batch has room

    def __post_init__(self) -> None:
        if self.max_work > self.queue_work:
            raise ValueError(f"serve.max_work={self.max_work} is above serve.queue_work={self.queue_work}: "
                             f"such a request could never be queued")


class Refused(Exception):
    """A request answered with an error status and one line."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


def create_app(translator: Translator, search: SearchConfig, limits: Limits = Limits(),
               hosts: set[str] | None = None) -> FastAPI:
    """The app for one loaded run; ``search``: the default search (the run's, with the command line's);
    ``hosts``: the Host headers answered (None: any, as for a test client)."""
    batcher = Batcher(translator, limits.window, batch_work=limits.batch_work, queue_work=limits.queue_work)

    async def lifespan(app: FastAPI):
        worker = None
        if not batcher.running:  # no model loop yet (a test client): one on a thread of its own
            worker = threading.Thread(target=batcher.run, name="model", daemon=True)
            worker.start()
        yield
        batcher.stop()
        if worker is not None:
            worker.join()

    app = FastAPI(title="Attention, from scratch: English→Spanish", lifespan=lifespan, docs_url=None,
                  redoc_url=None, description="Translate with a trained run; see the attention of a translation.")
    app.state.batcher = batcher

    @app.exception_handler(RequestValidationError)
    async def one_line(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first.get("type") == "json_invalid":  # its location is a character position
            where = "body"
        else:
            where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=error.status, headers=error.headers)

    async def answer(job: Job, http: Request):
        """The job's result, once the model has done it; 504 past the deadline, nothing if the client left
        (its work dropped either way)."""
        try:
            while not job.future.done():
                remaining = job.deadline - time.monotonic()
                if remaining <= 0:
                    job.future.cancel()
                    raise Refused(504, f"not done within serve.deadline={limits.deadline:g} s; its work was dropped")
                await asyncio.wait({job.future}, timeout=min(remaining, 0.25))
                if not job.future.done() and await http.is_disconnected():
                    job.future.cancel()  # the client left: its lines leave the queue
                    raise Refused(499, "the client left")
            return job.future.result()
        except ServerStopping as error:
            raise Refused(503, str(error)) from None

    def submit(lines: list[str], config: SearchConfig, costs: list[int], deadline: float, call=None) -> Job:
        try:
            return batcher.submit(lines, config, costs, deadline, call)
        except Overloaded as error:
            raise Refused(503, str(error), {"Retry-After": str(error.retry_after)}) from None
        except ServerStopping as error:
            raise Refused(503, str(error)) from None

    @app.post("/translate", response_model=TranslateResponse)
    async def translate(request: TranslateRequest, http: Request) -> TranslateResponse:
        """Translate lines, in order; an empty line stays empty."""
        too_long = [i for i, line in enumerate(request.lines) if len(line) > MAX_LINE_CHARS]
        if too_long:
            raise Refused(413, f"lines.{too_long[0]}: longer than {MAX_LINE_CHARS} characters")
        config = search if request.beam_size is None else replace(search, beam_size=request.beam_size)
        tokens = translator.source_tokens(request.lines)
        costs = [n * config.beam_size for n in tokens]
        first = next((i for i, line in enumerate(request.lines) if line.strip()), None)
        extra = 0 if first is None else (tokens[first] * config.beam_size * request.n_best
                                         + tokens[first] * request.attention)
        if sum(costs) + extra > limits.max_work:
            raise Refused(413, f"this request is {sum(costs) + extra} work (source tokens × beam_size, with its "
                               f"n_best and attention), over serve.max_work={limits.max_work}: send fewer or "
                               f"shorter lines, or a smaller beam_size")
        deadline = time.monotonic() + limits.deadline
        results = await answer(submit(request.lines, config, costs, deadline), http)
        reply = TranslateResponse(translations=[t.text for t in results])
        if first is not None and request.attention:
            call = lambda: attention_data(translator, results[first])  # noqa: E731
            reply.attention = await answer(submit([], config, [tokens[first]], deadline, call), http)
        if first is not None and request.n_best:
            call = lambda: translator.n_best(results[first], config)  # noqa: E731
            hypotheses = await answer(submit([], config, [costs[first]], deadline, call), http)
            reply.n_best = [Hypothesis(translation=text, score=score) for text, score in hypotheses]
        return reply

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        """The page: type English, see the Spanish and the attention that produced it."""
        defaults = {"beam_size": search.beam_size, "max_beam": MAX_BEAM}
        return (PAGE.read_text(encoding="utf-8")
                .replace("__DEFAULTS__", json.dumps(defaults))
                .replace("__EXPLORER__", json.dumps(TEMPLATE.read_text(encoding="utf-8")).replace("<", "\\u003c")))

    @app.get("/docs", response_class=HTMLResponse)
    async def docs() -> str:
        """The API, described by its OpenAPI schema, on a page that needs nothing from elsewhere."""
        schema = json.dumps(app.openapi(), indent=2, ensure_ascii=False)
        return (f"<!doctype html><meta charset=utf-8><link rel=icon href=\"data:,\">"
                f"<title>{html.escape(app.title)}: API</title>"
                f"<h1>{html.escape(app.title)}: API</h1><p>POST <code>/translate</code> with JSON, e.g. "
                f"<code>{{\"lines\": [\"I like cats.\"]}}</code>. The schema below is also at "
                f"<a href=\"/openapi.json\">/openapi.json</a>.</p><pre>{html.escape(schema)}</pre>")

    app.add_middleware(Guard, max_body=limits.max_body, hosts=hosts)
    return app


def attention_data(translator: Translator, translation: Translation) -> dict:
    """The explorer's data for one translation: what ``translate.py attention=x.html`` embeds."""
    view = translator.sentence_view(translation)
    steps = [{"label": "translation", "sentences": [sentence_record(view)]}]
    return explorer_data(steps, f"{view.source} → {view.translation}")


class Stopped(BaseException):
    """SIGTERM: stop serving (raised on the main thread, in the model's loop; like KeyboardInterrupt, not an
    ``Exception``, so that no handler of a batch's errors takes it for one)."""


def serve(translator: Translator, search: SearchConfig, host: str = "127.0.0.1", port: int = 8000,
          limits: Limits = Limits()) -> int:
    """Serve until Ctrl-C or SIGTERM: the web layer on a thread, the model's loop on this (the main) thread.
    Returns the exit code: 130 after Ctrl-C, 143 after SIGTERM."""
    import uvicorn

    app = create_app(translator, search, limits, loopback_hosts(port) if is_loopback(host) else None)
    batcher: Batcher = app.state.batcher
    batcher.running = True
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    web = threading.Thread(target=server.run, name="web", daemon=True)  # no signal handlers off the main thread
    web.start()
    while not server.started and web.is_alive():
        time.sleep(0.01)
    if not server.started:
        raise SystemExit(f"translate.py: cannot serve on {host}:{port} (in use, or not an address of this machine)")

    def stop(signum, frame) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, stop)
    print(f"translate.py: serving on http://{host}:{port}/ (API docs: /docs); Ctrl-C stops", flush=True)
    code = 0
    try:
        batcher.run()
    except KeyboardInterrupt:
        code = 130
    except Stopped:
        code = 143
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        batcher.stop()  # waiting and running requests are answered 503
        server.should_exit = True
        web.join(timeout=1.5)
    print(f"translate.py: stopped serving ({ {130: 'Ctrl-C', 143: 'SIGTERM'}.get(code, 'done') })", flush=True)
    return code
