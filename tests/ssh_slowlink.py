"""A slow link for ssh: `ProxyCommand python ssh_slowlink.py HOST PORT DELAY_MS`.

Relays stdin/stdout <-> one TCP connection and holds every chunk for DELAY_MS before passing
it on, in both directions, so each round trip of an ssh connection over it costs at least
2 * DELAY_MS. Chunks keep their order; the delay is latency, not a bandwidth limit. Ends when
the server closes its side (after the delayed tail is written) or ssh closes stdin and the
server then closes. Standard library only; talks to the one HOST:PORT it is given.
"""

from __future__ import annotations

import os
import queue
import socket
import sys
import threading
import time

CHUNK = 65536


def _pump(read, write, finish, delay: float) -> None:
    """Read chunks, and write each one `delay` seconds after it arrived; `finish()` at EOF."""
    held: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def reader() -> None:
        while True:
            try:
                data = read()
            except OSError:
                data = b""
            held.put((time.monotonic() + delay, data))
            if not data:
                return

    threading.Thread(target=reader, daemon=True).start()
    while True:
        due, data = held.get()
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if not data:
            finish()
            return
        try:
            write(data)
        except OSError:
            finish()
            return


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: ssh_slowlink.py HOST PORT DELAY_MS", file=sys.stderr)
        return 2
    host, port, delay = argv[0], int(argv[1]), int(argv[2]) / 1000.0
    try:
        sock = socket.create_connection((host, port), timeout=10)
    except OSError as exc:
        print(f"ssh_slowlink: cannot connect to {host}:{port}: {exc}", file=sys.stderr)
        return 1
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write_out(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]

    def close_sock_write() -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    upstream = threading.Thread(
        target=_pump,
        args=(lambda: os.read(0, CHUNK), sock.sendall, close_sock_write, delay),
        daemon=True,
    )
    upstream.start()
    # The server's side decides when the link is over: its EOF (or a reset) ends the relay.
    _pump(lambda: sock.recv(CHUNK), write_out, lambda: None, delay)
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
