"""What the server checks before any of a request reaches the app: its Host header and its body's size.

A page on another site can reach a server on 127.0.0.1 through DNS rebinding (its own name, made to
point at 127.0.0.1): the browser then sends that name as the Host header. On a loopback address
only this machine's own names for it are answered. The body is bounded before it is read: a
declared ``Content-Length`` over the bound is refused at once, a streamed body as soon as it passes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from ipaddress import ip_address

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
    """ASGI middleware: the Host check (when ``hosts`` is given) and the body bound, then the app."""

    def __init__(self, app: Callable, max_body: int, hosts: set[str] | None = None) -> None:
        self.app, self.max_body, self.hosts = app, max_body, hosts

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
        while more:  # read here, up to the bound, whatever the body claimed to be
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                return await refuse(send, 413, f"body: over the bound of {self.max_body} bytes (serve.max_body)")
        replayed = False

        async def replay() -> Message:  # the body once, then the client's own messages (its leaving)
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
