"""What the server checks before any of a request reaches the app: its Host header, its body's size and time,
and whether the model can take any request now (a POST refused before the app parses it).
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import ip_address

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serving.admission import Overloaded

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    try:
        return host == "localhost" or ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_hosts(port: int) -> set[str]:
    """The Host headers a browser sends for this machine on ``port`` (with the port, or without on 80)."""
    return {f"{name}:{port}" for name in LOOPBACK_NAMES} | ({*LOOPBACK_NAMES} if port == 80 else set())


async def refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str,
                 headers: dict[str, str] | None = None) -> None:
    """Answer ``{"error": message}`` with ``status``, as the app answers its own refusals, and close."""
    await JSONResponse({"error": message}, status, {"connection": "close", **(headers or {})})(scope, receive, send)


class Guard:
    """ASGI middleware: the Host check (when ``hosts`` is given: on a loopback address, as a page elsewhere can reach
    it by DNS rebinding, its own name made to point at 127.0.0.1), the body's bounds (its size and, as
    ``connections.py`` does for the head, its time), a POST refused while the model is full (under a flood, taking
    requests in only to refuse them is most of the work), then the app."""

    def __init__(self, app: ASGIApp, max_body: int, read_time: float, hosts: set[str] | None = None,
                 full: Callable[[], Overloaded | None] = lambda: None) -> None:
        self.app, self.max_body, self.read_time, self.hosts, self.full = app, max_body, read_time, hosts, full

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self.hosts is not None and host not in self.hosts:
            return await refuse(scope, receive, send, 421, f"Host header {host!r} is not this server: it answers "
                                                           f"{', '.join(sorted(self.hosts))}")
        declared = headers.get(b"content-length", b"0")
        too_big = f"body: over the bound of {self.max_body} bytes (serve.max_body)"
        if not declared.isdigit() or int(declared) > self.max_body:
            return await refuse(scope, receive, send, 413, too_big)
        body, more = bytearray(), True
        with anyio.move_on_after(self.read_time):  # one timer for the whole body (not one for each part)
            while more:  # read here, up to the bound, whatever the body claimed to be
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_body:
                    return await refuse(scope, receive, send, 413, too_big)
        if more:
            late = f"body: not all sent within serve.read_time={self.read_time:g} s"
            return await refuse(scope, receive, send, 408, late)
        if scope.get("method") == "POST" and (busy := self.full()):  # read, so that closing resets nothing
            return await refuse(scope, receive, send, 503, str(busy), {"retry-after": str(busy.retry_after)})
        replayed = False

        async def replay() -> Message:  # the body once, then the client's own messages (its leaving)
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
