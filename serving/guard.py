"""What the server checks before any of a request reaches the app: its Host header, its body's size and time,
and whether the model can take any request now.

A page on another site can reach a server on 127.0.0.1 through DNS rebinding (its own name, made to
point at 127.0.0.1): the browser then sends that name as the Host header. On a loopback address
only this machine's own names for it are answered. The body is bounded before it is read: a
declared ``Content-Length`` over the bound is refused at once, a streamed body as soon as it passes,
one that has not all come within ``serve.read_time`` seconds with 408 (a client that never finishes its
body would hold its connection for ever; ``connections.py`` does the same for a request's head). While
the model's queue cannot take even the least request in time, a POST is refused (503, ``Retry-After``)
before the app parses it: under a flood, taking requests in only to refuse them is most of the work.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from ipaddress import ip_address

import anyio

from serving.admission import Overloaded

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

Scope = dict
Message = dict
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    try:
        return host == "localhost" or ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_hosts(port: int) -> set[str]:
    """The Host headers a browser sends for this machine on ``port`` (with the port, or without on 80)."""
    return {f"{name}:{port}" for name in LOOPBACK_NAMES} | ({*LOOPBACK_NAMES} if port == 80 else set())


async def refuse(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``{"error": message}`` with ``status`` and close."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the Host check (when ``hosts`` is given), the body's bounds, a POST refused while the model is
    full, then the app."""

    def __init__(self, app: Callable, max_body: int, read_time: float, hosts: set[str] | None = None,
                 full: Callable[[], Overloaded | None] = lambda: None) -> None:
        self.app, self.max_body, self.read_time, self.hosts, self.full = app, max_body, read_time, hosts, full

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self.hosts is not None and host not in self.hosts:
            return await refuse(send, 421, f"Host header {host!r} is not this server: it answers "
                                           f"{', '.join(sorted(self.hosts))}")
        declared = headers.get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_body:
            return await refuse(send, 413, f"body: over the bound of {self.max_body} bytes (serve.max_body)")
        body, more = bytearray(), True
        with anyio.move_on_after(self.read_time):  # one timer for the whole body (not one for each part)
            while more:  # read here, up to the bound, whatever the body claimed to be
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_body:
                    return await refuse(send, 413, f"body: over the bound of {self.max_body} bytes (serve.max_body)")
        if more:
            return await refuse(send, 408, f"body: not all sent within serve.read_time={self.read_time:g} s")
        if scope.get("method") == "POST" and (busy := self.full()):  # read, so that closing resets nothing
            return await refuse(send, 503, str(busy), [(b"retry-after", str(busy.retry_after).encode())])
        replayed = False

        async def replay() -> Message:  # the body once, then the client's own messages (its leaving)
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
