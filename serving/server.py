"""The local server of ``translate.py serve=true`` (README.md, "Serve"): ``POST /translate``, the page and ``/docs``
(offline) for one loaded run, translating through its ``Translator``; requests take turns in shared model batches
(``batcher.py``) within limits (``limits.py``); no request names a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException

from model.inference.translator import Translation, Translator
from model.search import MAX_BEAM, SearchConfig
from model.views.explorer import TEMPLATE, explorer_data, sentence_record
from serving.admission import Overloaded
from serving.batcher import Batcher, Job, ServerStopping, line_costs
from serving.guard import Guard, is_loopback, loopback_hosts
from serving.limits import Limits

MAX_LINES = 64  # lines in one request
MAX_LINE_CHARS = 2000  # characters in one line: far more than a sentence, a bounded cost
PAGE = Path(__file__).with_name("page.html")


# A beam width as JSON Schema has a whole number: 5 or 5.0 (what some clients send for one), not 5.5, "5" or true.
BeamWidth = Annotated[int, Field(ge=1, le=MAX_BEAM), BeforeValidator(
    lambda value: int(value) if isinstance(value, float) and value.is_integer() else value)]


class TranslateRequest(BaseModel):
    """What ``POST /translate`` takes."""

    model_config = ConfigDict(extra="forbid", strict=True)
    lines: list[str] = Field(max_length=MAX_LINES, description=f"at most {MAX_LINES} lines")
    beam_size: BeamWidth | None = Field(None, description="1 = greedy; default: the run's")
    attention: bool = Field(False, description="also the explorer's data for the first non-empty line's sentences")
    n_best: bool = Field(False, description="also every hypothesis of the beam for the first non-empty line's "
                                            "first sentence or label, each as it stands in the line")
    alignments: bool = Field(False, description="also each line's word alignment")


class Hypothesis(BaseModel):
    """One hypothesis of the beam: its text and its length-normalized log-probability."""

    translation: str
    score: float


class TranslateResponse(BaseModel):
    """What ``POST /translate`` answers."""

    translations: list[str]
    cut: list[int] = Field(default_factory=list, description="lines (from 0) with a sentence longer than the model "
                                                             "reads, even cut at its inner punctuation: truncated")
    confidence: list[dict | None] = Field(default_factory=list, description=(
        "per line (null for an empty line): score (mean log-probability per output token; 0 is sure), agreement "
        "(0-100: how much the beam's other hypotheses say the same; null for greedy search and the other engines), "
        "mark (fine, check, likely wrong; without the run's confidence.json only a flag marks), flags (repeats, "
        "length, cut), and the same per sentence (its translation as it stands in the line) with its tokens and "
        "their probabilities"))
    attention: dict | None = None
    n_best: list[Hypothesis] | None = None
    alignments: list[list[tuple[int, int]]] | None = Field(None, description=(
        "per line, [source word, target word] pairs from 0 (Pharaoh's, as translate.py alignments=true prints them): "
        "the words as whitespace separates them in the line and in its translation, each target word linked to the "
        "source word its cross-attention weighs most (where the decoder looked, not why)"))


class ErrorReply(BaseModel):
    """What every refusal answers: one line."""

    error: str


# Every status a request may get besides 200, as the API page lists them.
REFUSALS = {400: "a body that is not JSON", 413: "more work than serve.max_work, or a line or body too long",
            422: "a body the schema refuses", 499: "the client left before its answer",
            503: "not answerable by its deadline at the measured rate (Retry-After), or stopping",
            504: "not done by serve.deadline: its work dropped"}


def create_app(translator: Translator, limits: Limits = Limits(), hosts: set[str] | None = None) -> FastAPI:
    """The app for one loaded run, searching with its settings (the run's, with the command line's);
    ``hosts``: the Host headers answered (None: any, as for a test client)."""
    pair = translator.settings.pair
    app = FastAPIOffline(title=f"Attention, from scratch: {pair.describe()}", lifespan=model_thread, redoc_url=None,
                         description=f"Translate {pair.describe(' to ')} with a trained run; see the attention of "
                                     f"a translation.")
    app.state.translator, app.state.limits = translator, limits
    app.state.batcher = Batcher(translator, limits)
    app.exception_handler(RequestValidationError)(one_line)
    app.exception_handler(HTTPException)(http_error)
    app.post("/translate", response_model=TranslateResponse, responses={
        status: {"model": ErrorReply, "description": why} for status, why in REFUSALS.items()})(translate)
    app.get("/", response_class=HTMLResponse, include_in_schema=False)(page)
    app.add_middleware(Guard, max_body=limits.max_body, read_time=limits.read_time, hosts=hosts,
                       full=app.state.batcher.full)
    return app


@contextlib.asynccontextmanager
async def model_thread(app: FastAPI):
    """The model's loop on a thread of its own when nobody runs it yet (a test client); stopped at the end."""
    batcher, worker = app.state.batcher, None
    if not batcher.running:
        worker = threading.Thread(target=batcher.run, name="model", daemon=True)
        worker.start()
    yield
    batcher.stop()
    if worker is not None:
        worker.join()


async def one_line(request: Request, error: RequestValidationError) -> JSONResponse:
    """A request the schema refuses: 422 with the first problem, where it is."""
    first = error.errors()[0]
    location = () if first.get("type") == "json_invalid" else first.get("loc", ())  # json_invalid's: a character
    where = ".".join(str(part) for part in location if part != "body") or "body"
    return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)


async def http_error(request: Request, error: HTTPException) -> JSONResponse:
    """Every refusal but the schema's (ours; Starlette's and FastAPI's own: a body it cannot parse, 400; 404, 405) in
    the same one-line shape."""
    return JSONResponse({"error": str(error.detail)}, status_code=error.status_code, headers=error.headers)


async def answer(job: Job, http: Request, allowed: float):
    """The job's result, once the model has done it; 504 past the deadline, 499 if the client left (its
    work dropped either way: its lines leave the queue and the running search)."""
    left = asyncio.ensure_future(client_leaves(http))
    try:
        await asyncio.wait({job.future, left}, timeout=max(0.0, job.deadline - time.monotonic()),
                           return_when=asyncio.FIRST_COMPLETED)
        if job.future.done():
            return job.future.result()
        job.future.cancel()
        if left.done():
            raise HTTPException(499, "the client left")
        raise HTTPException(504, f"not done within serve.deadline={allowed:g} s; its work was dropped")
    except ServerStopping as error:
        raise HTTPException(503, str(error)) from None
    finally:
        left.cancel()


async def client_leaves(http: Request) -> None:
    """Returns when the client disconnects: its body was read, so the next message is its leaving (waited for,
    not polled: a thousand waiting requests cost nothing until something happens)."""
    while (await http.receive())["type"] != "http.disconnect":
        pass


async def run_on_model(http: Request, lines: list[str], config: SearchConfig, costs: list[int], deadline: float,
                       call=None):
    """Lines (or one ``call``) through the model's queue, answered in turn; 503 when it is full or stopping."""
    state = http.app.state
    try:
        job = state.batcher.submit(lines, config, costs, deadline, call)
    except Overloaded as error:
        raise HTTPException(503, str(error), {"Retry-After": str(error.retry_after)}) from None
    except ServerStopping as error:
        raise HTTPException(503, str(error)) from None
    return await answer(job, http, state.limits.deadline)


def work(request: TranslateRequest, tokens: list[int], config: SearchConfig, limits: Limits) -> list[int]:
    """Each line's work (source tokens × beam width); 413 when the request's whole work (with the n-best
    and attention of its first line) is over ``serve.max_work`` or a line is over ``MAX_LINE_CHARS``."""
    too_long = [i for i, line in enumerate(request.lines) if len(line) > MAX_LINE_CHARS]
    if too_long:
        raise HTTPException(413, f"lines.{too_long[0]}: longer than {MAX_LINE_CHARS} characters")
    costs = line_costs(tokens, config)
    first = next((n for n in tokens if n), 0)  # the first non-empty line's tokens (0: none)
    total = sum(costs) + first * config.beam_size * request.n_best + first * request.attention \
        + sum(tokens) * request.alignments
    if total > limits.max_work:
        raise HTTPException(413, f"this request is {total} work (source tokens × beam_size, with its n_best and "
                                 f"attention), over serve.max_work={limits.max_work}: send fewer or shorter lines, "
                                 f"or a smaller beam_size")
    return costs


async def translate(request: TranslateRequest, http: Request) -> TranslateResponse:
    """Translate lines, in order; an empty line stays empty."""
    translator, limits = http.app.state.translator, http.app.state.limits
    search = translator.settings.search
    config = search if request.beam_size is None else replace(search, beam_size=request.beam_size)
    tokens = translator.source_tokens(request.lines)
    costs = work(request, tokens, config, limits)
    deadline = time.monotonic() + limits.deadline
    results = await run_on_model(http, request.lines, config, costs, deadline)
    reply = TranslateResponse(translations=[t.text for t in results], cut=[i for i, t in enumerate(results) if t.cut],
                              confidence=[translator.confidence_record(t) for t in results])
    # The first line with a sentence translated, decided once from what was translated ("- " or "\a" has none).
    first = next((i for i, translation in enumerate(results) if translation.sentences), None)
    if first is not None and request.attention:
        call = lambda: attention_data(translator, results[first])  # noqa: E731
        reply.attention = await run_on_model(http, [], config, [tokens[first]], deadline, call)
    if first is not None and request.n_best:
        call = lambda: translator.n_best(results[first], config)  # noqa: E731
        hypotheses = await run_on_model(http, [], config, [costs[first]], deadline, call)
        reply.n_best = [Hypothesis(translation=text, score=score) for text, score in hypotheses]
    if request.alignments:
        call = lambda: translator.align(results) or [t.alignment for t in results]  # noqa: E731
        reply.alignments = await run_on_model(http, [], config, [sum(tokens)], deadline, call)
    return reply


async def page(http: Request) -> str:
    """The page: type the run's source language, see the translation and the attention that produced it."""
    settings = http.app.state.translator.settings
    defaults = {"beam_size": settings.search.beam_size, "max_beam": MAX_BEAM}
    pair = settings.pair
    return (PAGE.read_text(encoding="utf-8")
            .replace("__SOURCE_CODE__", html.escape(pair.source))
            .replace("__SOURCE__", html.escape(pair.names[0]))
            .replace("__TARGET__", html.escape(pair.names[1]))
            .replace("__EXAMPLE__", "The sky is blue." if pair.source == "en" else "")
            .replace("__DEFAULTS__", json.dumps(defaults))
            .replace("__EXPLORER__", json.dumps(TEMPLATE.read_text(encoding="utf-8")).replace("<", "\\u003c")))


def attention_data(translator: Translator, translation: Translation) -> dict:
    """The explorer's data for every sentence of one line: what ``translate.py attention=x.html`` embeds."""
    records = [sentence_record(translator.sentence_view(sentence)) for sentence in translation.sentences]
    steps = [{"label": "translation", "sentences": records}]
    return explorer_data(steps, f"{translation.source} → {translation.text}")


class Stopped(BaseException):
    """SIGTERM: stop serving (raised on the main thread, in the model's loop; like KeyboardInterrupt, not an
    ``Exception``, so that no handler of a batch's errors takes it for one)."""


class CannotServe(OSError):
    """The address cannot be served (in use, or not this machine's)."""


def serve(translator: Translator, host: str = "127.0.0.1", port: int = 8000, limits: Limits = Limits(),
          say: Callable[[str], None] = print) -> int:
    """Serve until Ctrl-C or SIGTERM: the web layer on a thread, the model's loop on this (the main) thread.
    ``say`` tells the user when serving starts and stops. Returns the exit code: 130 after Ctrl-C, 143 after
    SIGTERM."""
    import uvicorn

    from serving.connections import TimelyH11, raise_open_files_limit

    raise_open_files_limit()  # every client at once needs a file each
    app = create_app(translator, limits, loopback_hosts(port) if is_loopback(host) else None)
    batcher: Batcher = app.state.batcher
    batcher.warm_up()  # not the first client: it pays the model's one-time costs and measures the rate
    batcher.running = True
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1,
                                           http=functools.partial(TimelyH11, read_time=limits.read_time)))
    web = threading.Thread(target=server.run, name="web", daemon=True)  # no signal handlers off the main thread
    web.start()
    while not server.started and web.is_alive():
        time.sleep(0.01)
    if not server.started:
        raise CannotServe(f"cannot serve on {host}:{port} (in use, or not an address of this machine)")

    def stop(signum, frame) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, stop)
    say(f"serving on http://{host}:{port}/ ({translator.settings.pair.describe()}; API docs: /docs); Ctrl-C stops")
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
    say(f"stopped serving ({ {130: 'Ctrl-C', 143: 'SIGTERM'}.get(code, 'done') })")
    return code
