"""Connections, apart from the requests on them: the open-files limit raised as far as the system allows, and one that
sends no request head within ``serve.read_time`` closed. uvicorn kept a half-open one for ever, holding a file: with
1,024 of them the server answered nobody (docs/results.md, "A flood"). The guard bounds the body's time.
"""

from __future__ import annotations

import asyncio
import select

from uvicorn.protocols.http.h11_impl import H11Protocol


def raise_open_files_limit() -> int | None:
    """The process's soft limit of open files raised to its hard limit; the limit now (None: no such limit here,
    as on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):  # not allowed here: keep the limit there is
        return soft
    return wanted


class TimelyH11(H11Protocol):
    """uvicorn's HTTP/1.1 connection, closed when no request head has arrived ``read_time`` seconds after it
    opened or after its last answer (a connection kept alive waits for its next request as long)."""

    def __init__(self, *args, read_time: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_time, self.answers = read_time, 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.loop.call_later(self.read_time, self._close_without_head, self.answers)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.answers += 1
        self.loop.call_later(self.read_time, self._close_without_head, self.answers)

    def _close_without_head(self, answers: int) -> None:
        waiting_for_head = self.cycle is None or self.cycle.response_complete
        if answers != self.answers or not waiting_for_head or self.transport.is_closing():
            return
        if unread(self.transport):  # the client sent what a busy server has not read yet: not the client's delay
            self.loop.call_later(self.read_time, self._close_without_head, answers)
        else:
            self.transport.close()


def unread(transport: asyncio.Transport) -> bool:
    """Whether the connection has bytes (or its end) waiting that the server has not read yet (poll, not select:
    a flood's connections have file numbers past select's 1,024)."""
    socket = transport.get_extra_info("socket")
    if not hasattr(select, "poll"):  # Windows: its select takes any socket
        return bool(select.select([socket], [], [], 0)[0])
    poller = select.poll()
    poller.register(socket.fileno(), select.POLLIN)
    return bool(poller.poll(0))

