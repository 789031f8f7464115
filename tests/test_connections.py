"""serving/connections.py: the open-files limit raised, and a connection that sends no request head in time closed
(on uvicorn serving a stand-in app on a free local port), while the others are answered."""

import functools
import resource
import socket
import threading
import time

import pytest
import uvicorn

from serving.connections import TimelyH11, raise_open_files_limit

READ_TIME = 0.5


def test_the_open_files_limit_is_raised_to_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        assert raise_open_files_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == (hard if hard != resource.RLIM_INFINITY else 1 << 20)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def hello(scope, receive, send) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(hello, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                           http=functools.partial(TimelyH11, read_time=READ_TIME)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(timeout=5)


def answer(connection: socket.socket) -> bytes:
    """One whole response of the stand-in app (its body is b"ok")."""
    received = b""
    while not received.endswith(b"\r\n\r\nok"):
        received += connection.recv(4096)
    return received


def closed_after(connection: socket.socket, limit: float) -> float | None:
    """Seconds until the server closed ``connection`` (None: still open after ``limit``)."""
    start = time.monotonic()
    connection.settimeout(limit)
    try:
        while connection.recv(4096):
            pass
    except TimeoutError:
        return None
    return time.monotonic() - start


def test_a_connection_without_a_request_head_in_time_is_closed(port):
    head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port)) as silent, \
            socket.create_connection(("127.0.0.1", port)) as partial, \
            socket.create_connection(("127.0.0.1", port)) as kept_alive:
        partial.sendall(head[:20])  # part of a head, never the rest
        kept_alive.sendall(head)  # one whole request, answered; then part of the next one
        assert answer(kept_alive).startswith(b"HTTP/1.1 200")
        kept_alive.sendall(head[:20])
        for connection in (silent, partial, kept_alive):
            assert closed_after(connection, 20 * READ_TIME) is not None
    with socket.create_connection(("127.0.0.1", port)) as prompt:  # a client that sends in time is answered
        time.sleep(READ_TIME / 5)
        prompt.sendall(head)
        assert answer(prompt).startswith(b"HTTP/1.1 200")


def test_a_connection_kept_alive_serves_request_after_request_sent_in_time(port):
    head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port)) as connection:
        for _ in range(4):  # longer than read_time in all, each request within read_time of the last answer
            connection.sendall(head)
            assert answer(connection).startswith(b"HTTP/1.1 200")
            time.sleep(READ_TIME / 2)
