"""serving/guard.py as an ASGI app around a stand-in app, then the server's limits against a real server on a
free local port: bodies bounded before they are read, the Host check, bad characters, work over the budget,
/docs offline."""

import asyncio
import json
import re
import socket
import time
from pathlib import Path

import pytest

from helpers import call, post, serving
from serving.guard import Guard, loopback_hosts


def through_guard(guard_options: dict, headers: dict[str, str], chunks: list[bytes | None],
                  method: str = "POST") -> tuple[int, bytes, bytes | None]:
    """One HTTP request through ``Guard`` around an app that echoes the body it reads: (status, response body,
    the body the app read, None if it was never called). ``chunks``: the request body as the client streams it (None:
    a part that never comes)."""
    received = []

    async def echo(scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        received.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    messages = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1} for i, chunk in enumerate(chunks)]
    sent = []

    async def receive():
        if messages and messages[0]["body"] is None:  # a chunk that never comes: the client stalls
            await asyncio.sleep(3600)
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(Guard(echo, **{"read_time": 10.0, **guard_options})(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), received[0] if received else None


def test_the_guard_passes_a_body_within_its_bound_whole_to_the_app():
    status, body, read = through_guard({"max_body": 10}, {"Content-Length": "8"}, [b"1234", b"5678"])
    assert status == 200 and read == body == b"12345678"


@pytest.mark.parametrize("headers, chunks", [({"Content-Length": "11"}, [b"x" * 11]),  # declared over the bound
                                             ({"Content-Length": "4"}, [b"x" * 4] * 3),  # streamed past it
                                             ({"Content-Length": "ten"}, [b"x"])])  # not a number
def test_the_guard_refuses_a_body_over_its_bound_before_the_app_sees_it(headers, chunks):
    status, body, read = through_guard({"max_body": 10}, headers, chunks)
    assert status == 413 and read is None and "serve.max_body" in json.loads(body)["error"]


def test_the_guard_answers_408_to_a_body_not_sent_within_its_time():
    start = time.monotonic()
    status, body, read = through_guard({"max_body": 10, "read_time": 0.2}, {"Content-Length": "8"}, [b"1234", None])
    assert status == 408 and read is None and "serve.read_time=0.2 s" in json.loads(body)["error"]
    assert time.monotonic() - start < 10  # at its time, not when the client would have sent the rest


def test_a_post_is_refused_before_the_app_sees_it_while_the_model_can_take_nothing():
    from serving.admission import Overloaded

    full = Overloaded("the server is busy: 9000 work comes before it; try again in 7 s", 7)
    status, body, read = through_guard({"max_body": 10, "full": lambda: full}, {"Content-Length": "4"}, [b"1234"])
    assert status == 503 and read is None and json.loads(body)["error"] == str(full)
    get = through_guard({"max_body": 10, "full": lambda: full}, {}, [b""], method="GET")  # the page is still served
    assert get[0] == 200 and get[2] == b""


def test_the_guard_answers_only_the_hosts_it_is_given():
    hosts = loopback_hosts(8000)
    assert through_guard({"max_body": 10, "hosts": hosts}, {"Host": "localhost:8000"}, [b""])[0] == 200
    status, body, read = through_guard({"max_body": 10, "hosts": hosts}, {"Host": "evil.example:8000"}, [b""])
    assert status == 421 and read is None and "is not this server" in json.loads(body)["error"]
    assert through_guard({"max_body": 10}, {"Host": "evil.example"}, [b""])[0] == 200  # no hosts: any

HEAVY = {"lines": [("Tom said that Mary thought that John knew that " * 40)[:2000]] * 64, "beam_size": 64,
         "n_best": True, "attention": True}


@pytest.fixture(scope="module")
def server(slow_run):
    with serving(slow_run) as (port, ended, process):
        yield port, process
    assert ended[0] == 130 and b"Traceback" not in ended[2], ended[2].decode()


def until_closed(connection: socket.socket) -> str:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received.decode()


def resident_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_a_request_over_the_work_budget_is_refused_at_once(server):
    port, _ = server
    start = time.monotonic()
    assert post(port, {"lines": ["I like cats."]}, timeout=60)["translations"][0]
    short = time.monotonic() - start  # one short translation, on this machine now
    start = time.monotonic()
    status, _, body = call(port, "POST", "/translate", HEAVY)
    refused = time.monotonic() - start
    error = json.loads(body)["error"]
    # At once: in the time of a few short translations (2 s on an idle machine), not of the work it asks for.
    assert status == 413 and refused < max(2.0, 10 * short) and "serve.max_work=8192" in error and "\n" not in error
    assert post(port, {"lines": ["I like cats."]}, timeout=max(5.0, 10 * short))["translations"][0]  # none held up


# A lone surrogate (UTF-8 cannot encode it) becomes U+FFFD, a control character a space (data/lines.py, clean_text).
@pytest.mark.parametrize("line, cleaned", [("\ud800 hello", "\ufffd hello"), ("\udfff", "\ufffd"), ("a\x00b", "a b"),
                                           ("bell\x07 and escape\x1b[31m", "bell  and escape [31m"),
                                           ("del\x7f \x85", "del")])  # the spaces they become end the line: stripped
def test_characters_a_tokenizer_cannot_take_are_cleaned_not_a_500(server, line, cleaned):
    port, _ = server
    status, _, body = call(port, "POST", "/translate", json.dumps({"lines": [line], "attention": True}).encode(),
                           {"Content-Type": "application/json"})  # json.dumps keeps \ud800 escaped, as a client sends it
    assert status == 200, body
    answer = json.loads(body)
    # The model read the cleaned line (the explorer's title is "source → translation") and translated it just
    # as it translates that line sent clean: each character replaced, nothing else of the line lost or changed.
    assert answer["attention"]["title"] == f"{cleaned} → {answer['translations'][0]}"
    assert answer["translations"] == post(port, {"lines": [cleaned]})["translations"]


def test_a_body_over_the_bound_is_refused_before_it_is_read(server):
    port, process = server
    memory = resident_kib(process.pid)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:  # 100 MB announced, none sent
        connection.sendall(f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {100_000_000}\r\n\r\n".encode())
        start = time.monotonic()
        answer = until_closed(connection)
    assert answer.startswith("HTTP/1.1 413") and "over the bound of 1000000 bytes" in answer
    assert time.monotonic() - start < 2
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:  # streamed: cut when it passes
        connection.sendall(f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                           f"Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * 65536
        for _ in range(17):  # just over 1 MB, and the body not ended: the server answers as soon as it passes
            connection.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            time.sleep(0.02)  # each chunk read before the next: nothing unread when it closes (no reset)
        answer = until_closed(connection)
    assert answer.startswith("HTTP/1.1 413")
    assert resident_kib(process.pid) < memory + 20_000  # no 100 MB body held


def test_only_this_machines_names_are_answered_on_loopback(server):
    port, _ = server
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert call(port, "POST", "/translate", {"lines": ["Hi."]}, {"Host": host})[0] == 200, host
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", ""):
        status, _, body = call(port, "POST", "/translate", {"lines": ["Hi."]}, {"Host": host})
        assert status == 421 and "is not this server" in json.loads(body)["error"], host


def test_the_api_docs_need_nothing_from_elsewhere(server):
    port, _ = server
    status, _, page = call(port, "GET", "/docs")
    assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.decode())
    assert status == 200 and "swagger-ui" in page.decode() and assets
    assert all(asset.startswith("/") and call(port, "GET", asset)[0] == 200 for asset in assets)  # served here
    status, _, schema = call(port, "GET", "/openapi.json")
    assert status == 200 and "/translate" in json.loads(schema)["paths"] and b"TranslateRequest" in schema
