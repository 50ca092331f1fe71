"""`hitl serve`: the same app in a browser, through textual-serve.

textual-serve runs one command per browser session and relays its terminal to xterm.js over a
websocket; the command is this hitl (`python -m hitl_tui PATH... --config FILE`), so each tab
is the real app on the same repositories, writing the same files. Whoever reaches the page
answers blocks, so it listens on 127.0.0.1 unless `--allow-remote` says otherwise (with a
warning), and the page and its websocket refuse requests from other sites: a `Host` that is not
this server (DNS rebinding) and a websocket whose `Origin` is not the page's own (another site
open in the same browser driving the app). And they need the server's token (`?token=` in the
address it prints; the page's websocket is `/ws/TOKEN`): another user of this machine reaches
127.0.0.1 too. No cookie holds it: a browser sends a cookie of 127.0.0.1 to every port there,
another user's server included.

The page calls no other machine (offline it is whole): hitl's own copy of textual-serve's page
(serve_page/) takes its font from textual-serve's static folder rather than Google's, and this
server answers /favicon.ico.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import ipaddress
import os
import re
import secrets
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hitl_tui.cli.base import PROG, Parser, add_common
from hitl_tui.model import HitlError, UsageError
from hitl_tui.textio import one_line, printable

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: The environment variable that sets the token (else a new one each start).
TOKEN_ENV = "HITL_SERVE_TOKEN"
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,256}\Z")
#: Set in each session app's environment to the server's pid: the app ends with the server.
SERVED_BY_ENV = "HITL_SERVED_BY"
#: The driver textual-serve sets in the same environment: only a session app heeds SERVED_BY_ENV.
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
#: hitl's page (textual-serve's, calling no other machine) and its icon.
PAGE_FOLDER = Path(__file__).with_name("serve_page")
#: prctl(2)'s option: the signal this process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1

EPILOG = f"""\
Each browser tab runs its own hitl app on the same repositories; answers are written to disk
exactly as in the terminal. Anyone who can open the page can answer blocks, which writes to the
repositories. So the server listens on {DEFAULT_HOST} only, unless --allow-remote (a warning
says so), and the page needs a token: open the address it prints (http://...?token=...).
Another user of this machine, who can reach {DEFAULT_HOST} too, cannot open it without the
token. The token is new at each start unless ${TOKEN_ENV} sets one (16 or more of
A-Z a-z 0-9 _ -), for a bookmark that lasts.

From a phone or a laptop, reach it through an SSH tunnel instead:
  ssh -L 8000:127.0.0.1:8000 HOST     # on the laptop, then open the printed address there

examples:
  hitl serve ~/loops                  # http://127.0.0.1:8000/?token=...
  hitl serve --port 8080 shop infra
  hitl serve --host 0.0.0.0 --allow-remote ~/loops   # a trusted network only

The page answers only to an address, this machine's name, or the name given to --host: any
other name could be a web site's, pointed at this machine (DNS rebinding).

Ctrl+C stops the server and every app it runs.
exit codes: 0 stopped, 2 bad usage, 1 anything else (the port is taken)."""


def build_serve() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} serve",
        description="Serve the app in a web browser (textual-serve), on 127.0.0.1 by default.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        metavar="ADDRESS",
        help=f"the address to listen on (default {DEFAULT_HOST}; another needs --allow-remote)",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"the port to listen on (default {DEFAULT_PORT})",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow an address other machines can reach: anyone reaching the page can "
        "answer blocks and write to the repositories",
    )
    return p


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1-65535): {port}")
    return port


def is_loopback(host: str) -> bool:
    """Only this machine can reach `host` (a loopback address, or `localhost`)."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def listens_on_loopback(host: str) -> bool:
    """Only this machine can reach what listening on `host` binds: every address the name
    resolves to (the server binds them all) is a loopback one. `127.1` is; `0` (0.0.0.0) and
    a name that resolves to another address are not. A name that does not resolve is judged
    by its form (listening on it then fails, with its own error)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return is_loopback(host)
    addresses = {str(info[4][0]).split("%")[0] for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


#: A Host header as a browser sends it: a name or an address, then maybe a port. Nothing else
#: (`evil.example@127.0.0.1`, spaces, a path) is a host a browser could have been sent to.
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]{1,5})?\Z")


def host_name(header: str) -> str | None:
    """The host of a Host header, lowercased and without brackets, or None if it is not one."""
    match = _HOST_HEADER.match(header)
    return match.group(1).strip("[]").lower() if match else None


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def app_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs per browser session: this hitl, on these paths."""
    argv = [sys.executable, "-m", "hitl_tui"]
    argv += [os.path.abspath(p) for p in args.paths]
    if args.config:
        argv += ["--config", os.path.abspath(args.config)]
    # `exec`: the session's process is this hitl itself, not a shell above it, so that ending
    # it (see HitlServer.run) ends the app.
    return "exec " + shlex.join(argv)


def shown_url(host: str, port: int) -> str:
    """The address to open: the host's name when listening on every address."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def run_serve(args: argparse.Namespace) -> int:
    import asyncio  # here: every other command (`hitl list`) starts without it

    from hitl_tui.cli.base import repo_paths
    from hitl_tui.config import load_config
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.paths import check_state_dir

    if args.host.startswith("[") and args.host.endswith("]"):
        args.host = args.host[1:-1]  # [::1], as in a URL: the address to listen on is ::1
    loopback = listens_on_loopback(args.host)
    if not loopback and not args.allow_remote:
        raise UsageError(
            f"--host {args.host}: other machines could answer blocks; add --allow-remote "
            "to mean it, or use an SSH tunnel (see 'hitl serve --help')"
        )
    # What each session would refuse, refused once here: a bad config, a missing folder.
    config = load_config(args.config)
    repos = Workspace.discover(repo_paths(args, config)).repos
    check_state_dir()  # every session journals its answers there: refuse a broken one now
    if not loopback:
        print(
            f"hitl: warning: serving on {args.host} over plain http: the token crosses the "
            "network readable, and whoever reads it can answer blocks and write to the "
            "repositories",
            file=sys.stderr,
            flush=True,
        )
    # Read, then taken out of the environment the session apps (and the commands they run)
    # inherit: the token is the server's alone.
    token = os.environ.pop(TOKEN_ENV, "") or secrets.token_urlsafe(24)
    if not TOKEN_SHAPE.match(token):
        raise UsageError(f"${TOKEN_ENV} must be 16 to 256 of A-Z a-z 0-9 _ - (a URL's word)")
    count = f"{len(repos)} repositor{'y' if len(repos) == 1 else 'ies'}"
    server = _server_class()(app_command(args), args.host, args.port, count, loopback, token)
    try:
        asyncio.run(server.run())
    except OSError as exc:
        raise HitlError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None
    print("hitl: stopped", file=sys.stderr)
    return 0


def _server_class():
    """textual-serve's Server, listening where it was told and guarding its two doors."""
    import asyncio

    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve import server as served
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    #: Every session's app process, so that none outlives the server.
    processes: set[asyncio.subprocess.Process] = set()

    class TrackedAppService(AppService):
        def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
            environment = super()._build_environment(width, height)
            # The session app ends with this server, even one killed with SIGKILL (no
            # handler of ours runs then): see end_with_server.
            environment[SERVED_BY_ENV] = str(os.getpid())
            return environment

        async def _open_app_process(self, width: int = 80, height: int = 24):
            process = await super()._open_app_process(width, height)
            processes.add(process)
            return process

    served.AppService = TrackedAppService  # what Server.handle_websocket builds per session

    async def end_apps(grace: float = 3.0) -> None:
        """Every session app still running after the sessions ended: terminated, then killed."""
        left = [p for p in processes if p.returncode is None]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for process in left:
                # os.kill, not Process.terminate: that polls, and a poll reaping the child
                # before asyncio's watcher does makes it warn of an unknown child on stderr.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(process.pid, sig)
            if left:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*(p.wait() for p in left)), timeout=grace)
            left = [p for p in left if p.returncode is None]

    class HitlServer(Server):
        def __init__(
            self, command: str, host: str, port: int, what: str, loopback: bool, token: str
        ) -> None:
            super().__init__(
                command, host=host, port=port, title="hitl", templates_path=PAGE_FOLDER
            )
            self.what = what
            self.token = token
            #: The running sessions (their websocket handlers), ended first on stop.
            self.sessions: set[asyncio.Task] = set()
            self.loopback = loopback
            #: The names a browser may use besides an address (DNS rebinding: any other name
            #: may be a site's, resolved to this machine): --host's, and this machine's own.
            self.names = {host.lower().rstrip(".")}
            if not loopback:
                for name in (socket.gethostname(), socket.getfqdn()):
                    self.names.add(name.lower().rstrip("."))

        def serves(self, name: str) -> bool:
            """`name` (of a Host header) is this server: never a name a site may control."""
            if name in self.names or is_loopback(name):
                return True
            return not self.loopback and is_address(name)

        def _refused(self, request: web.Request) -> str | None:
            """Why this request is not served, or None."""
            header = request.headers.get("Host", "")
            name = host_name(header)
            if name is None or not self.serves(name):
                shown = printable(one_line(header))[:100] or "no Host"
                if self.loopback:
                    return f"hitl serves 127.0.0.1:{self.port} only, not {shown}"
                return (
                    f"hitl serves this machine by its address or as {socket.gethostname()}, "
                    f"not {shown}"
                )
            origin = request.headers.get("Origin")
            if origin is not None and urlsplit(origin).netloc != request.host:
                return "a page of another site cannot drive hitl"
            return None

        def _holds_token(self, request: web.Request) -> bool:
            """The request carries this server's token: `?token=`, or the page's websocket
            path `/ws/TOKEN`."""
            for given in (request.match_info.get("token"), request.query.get("token")):
                if given and hmac.compare_digest(
                    given.encode("utf-8", "replace"), self.token.encode()
                ):
                    return True
            return False

        def _checked(self, request: web.Request) -> None:
            why = self._refused(request)
            if why is None and not self._holds_token(request):
                why = (
                    "hitl serve needs its token: open the address it printed (http://...?token=...)"
                )
            if why is not None:
                raise web.HTTPForbidden(text=why)

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            self._checked(request)
            # The page's URLs are the address the browser used (a tunnel, another port), never
            # the listening address (0.0.0.0 is no address a browser can reach).
            base = f"{request.scheme}://{request.host}"
            scheme = "wss" if request.scheme == "https" else "ws"
            ws = f"{scheme}://{request.host}/ws/{self.token}"  # the page's own way in
            context: dict[str, Any] = {
                "font_size": _int(request.query.get("fontsize"), 16),
                "app_websocket_url": ws,
                "config": {"static": {"url": f"{base}/static/"}},
                "application": {"name": "hitl"},
            }
            page = aiohttp_jinja2.render_template("app_index.html", request, context)
            # The address holds the token: never sent on as a Referer, never kept in a cache.
            page.headers["Referrer-Policy"] = "no-referrer"
            page.headers["Cache-Control"] = "no-store"
            return page

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            self._checked(request)
            task = asyncio.current_task()
            assert task is not None
            self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions.discard(task)

        async def handle_favicon(self, request: web.Request) -> web.StreamResponse:
            """The tab's icon (no token: like /static, it tells nothing). A browser asks for
            it on every page of this server, a refusal included."""
            return web.FileResponse(
                PAGE_FOLDER / "favicon.svg", headers={"Content-Type": "image/svg+xml"}
            )

        async def handle_download(self, request: web.Request) -> web.StreamResponse:
            self._checked(request)
            return await super().handle_download(request)

        async def on_startup(self, app: web.Application) -> None:
            """(textual-serve prints a banner here: hitl prints one line once listening.)"""

        async def run(self) -> None:
            """Listen, say where on one line, serve until SIGINT or SIGTERM."""
            app = await self._make_app()
            app.router.add_get("/ws/{token}", self.handle_websocket)
            app.router.add_get("/favicon.ico", self.handle_favicon)
            runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=5)
            await runner.setup()
            try:
                # Before the line that says it is up: a Ctrl+C right after it stops cleanly.
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                site = web.TCPSite(runner, self.host, self.port)
                await site.start()
                url = f"{shown_url(self.host, self.port)}/?token={self.token}"
                print(f"hitl: serving {self.what} at {url} (Ctrl+C stops)", flush=True)
                await stop.wait()
                # Each session's app is told to quit and its page shows "Session ended" (else
                # aiohttp would wait for the open websockets before closing them).
                for task in list(self.sessions):
                    task.cancel()
                if self.sessions:
                    await asyncio.wait(list(self.sessions), timeout=10)
            finally:
                await end_apps()  # an app that did not quit when told is ended, never left
                await runner.cleanup()

    return HitlServer


def end_with_server() -> None:
    """In a session app of `hitl serve` (SERVED_BY_ENV names the server): end when the server
    ends, however it ends. A server killed with SIGKILL left its apps running otherwise, taking
    locks and claiming notices, for as long as nothing made them write to the closed pipe.

    PR_SET_PDEATHSIG sends SIGTERM when the thread that forked this process ends: the server's
    event loop thread (asyncio.run in its main thread) starts every session, and lives as long
    as the server. It survives the shell's `exec` (app_command). The server may have died
    before it was set: then this process has another parent already, and ends now. Linux
    only (elsewhere the server's own stop ends its apps, see HitlServer.run)."""
    served_by = os.environ.pop(SERVED_BY_ENV, None)  # never inherited by what the app runs
    if served_by is None or not sys.platform.startswith("linux"):
        return
    if os.environ.get("TEXTUAL_DRIVER") != WEB_DRIVER:
        return  # not a session app (set in a plain run's environment, by anyone): ignored
    try:
        server = int(served_by)
    except ValueError:
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != server:
        os._exit(1)  # the server is gone already: nothing is held yet, nothing to tidy


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default
