"""A replayable sequence of bad requests against a running translation server, on 127.0.0.1 only.

    python scripts/bad_requests.py 8000            # against translate.py run=… serve=true port=8000

Bad types and bodies (each answered 4xx), a 100 MB body, a deeply nested body, the heaviest request
(refused 413), and many half-open connections (a request's headers or body begun and never finished),
held a while and then dropped. ``scripts/benchmark_server.py --flood`` floods a server before and after
it; ``tests/test_server_flood.py`` does the same on a small model. Prints what each part was answered.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import time
from collections import Counter

BAD_BODIES = [b"{not json", b'{"lines": "one line"}', b'{"lines": [1, 2]}', b'{"lines": ["Hi."], "beam_size": 0}',
              b'{"lines": ["Hi."], "beam_size": "5"}', b'{"lines": ["Hi."], "file": "/etc/passwd"}',
              b'{"lines": null}', b"[]", b'"lines"', b"", json.dumps({"lines": ["Hi."] * 65}).encode()]
HEAVIEST = {"lines": ["Tom said that Mary thought " * 80] * 64, "beam_size": 64, "n_best": True, "attention": True}


def status_of(port: int, body: bytes, headers: dict[str, str] | None = None, timeout: float = 60) -> int:
    """POST /translate with ``body``: the status answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/translate", body=body, headers={"Content-Type": "application/json",
                                                                     **(headers or {})})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def huge_body(port: int, megabytes: int = 100) -> int | None:
    """A body declared and sent at ``megabytes`` MB: the status answered (None if the server only closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        size = megabytes * 1_000_000
        connection.sendall(f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {size}\r\n\r\n".encode())
        chunk = b"x" * 1_000_000
        try:
            for _ in range(megabytes):
                connection.sendall(chunk)
        except OSError:  # the server answered and closed: the rest is never read
            pass
        try:
            answer = connection.recv(64)
        except OSError:
            return None
        return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1") else None


def half_open(port: int, count: int, hold: float) -> int:
    """``count`` connections that begin a request and never finish it (half of them in the headers, half in the
    body), held ``hold`` seconds, then dropped: how many the server had accepted and still held open."""
    connections = []
    for i in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        begun = f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        connection.sendall((begun if i % 2 else begun + 'Content-Length: 100\r\n\r\n{"lines": ["').encode())
        connections.append(connection)
    time.sleep(hold)
    still_open = 0
    for connection in connections:
        connection.setblocking(False)
        try:
            connection.recv(65536)  # b"": the server closed it; an answer (408): it answered and closed
        except BlockingIOError:  # nothing from the server: it still holds the connection
            still_open += 1
        except OSError:  # reset: closed
            pass
        connection.close()
    return still_open


def replay(port: int, connections: int = 2000, hold: float = 2.0) -> dict[str, object]:
    """The whole sequence, in order: what each part was answered."""
    said: dict[str, object] = {}
    said["bad types"] = dict(Counter(status_of(port, body) for body in BAD_BODIES))
    said["100 MB body"] = huge_body(port)
    said["deep nesting"] = status_of(port, b'{"lines": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    said["heaviest request"] = status_of(port, json.dumps(HEAVIEST).encode())
    said[f"{connections} half-open connections, still open after {hold:g} s"] = half_open(port, connections, hold)
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("port", type=int, help="the server's port on 127.0.0.1")
    parser.add_argument("--connections", type=int, default=2000, help="half-open connections")
    args = parser.parse_args()
    for part, answer in replay(args.port, args.connections).items():
        print(f"{part}: {answer}")


if __name__ == "__main__":
    main()
