"""`hitl serve`: the app in a browser (issue 17), through a real server process.

The CLI contract (the URL line, the refusal of a non-loopback address, the warning, Ctrl+C,
the page's guards) runs everywhere. The end-to-end test drives Debian's headless Chromium over
the DevTools protocol (aiohttp's websocket client, which textual-serve brings): the page loads,
the block's question is in xterm.js's screen, two keys answer it, and the files change on disk;
and every request the page makes (the DevTools protocol's Network events) goes to this server.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUESTION = "Should deleting a workspace also delete its archived invoices"
WAIT = 90.0  # seconds: the bound of every wait (a shared 2-core machine starts apps slowly)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    """A folder (its name has a space and a quote: the command is quoted) with the shop repo."""
    root = tmp_path / "my loops 'n' $HOME"
    shutil.copytree(FIXTURES / "loopkit-shop", root / "shop")
    (root / "shop" / ".git").mkdir()
    return root


#: The token the tests' servers use (`$HITL_SERVE_TOKEN`).
TOKEN = "test-token-0123456789abcdef"


class Served:
    """A `hitl serve` process; its stdout lines arrive in a queue (reads never block a test)."""

    def __init__(self, *args: object, cwd: Path, token: str | None = TOKEN) -> None:
        env = {**os.environ, "PYTHONUTF8": "1"}
        env.pop("HITL_SERVE_TOKEN", None)
        if token is not None:
            env["HITL_SERVE_TOKEN"] = token
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hitl_tui", "serve", *map(str, args)],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def first_line(self) -> str:
        try:
            return self.lines.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail(f"hitl serve printed nothing in {WAIT:.0f} s")

    def stop(self) -> tuple[int, str]:
        """Ctrl+C (SIGINT, as a terminal sends it): (exit code, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _out, err = self.proc.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
            pytest.fail(f"hitl serve did not stop on Ctrl+C: {err}")
        return self.proc.returncode, err


@pytest.fixture
def serve():
    started: list[Served] = []

    def start(*args: object, cwd: Path, token: str | None = TOKEN) -> Served:
        started.append(Served(*args, cwd=cwd, token=token))
        return started[-1]

    yield start
    for served in started:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.communicate()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get_raw(url: str, headers: dict[str, str] | None = None):
    """The response itself, a redirect not followed: (status, its headers)."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=WAIT) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", "serve", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=WAIT,
        env={**os.environ, "PYTHONUTF8": "1"},
    )


# -- the command line ----------------------------------------------------------------------------


def test_help_says_how_to_reach_it_safely(loops: Path):
    result = run("--help", cwd=loops)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: hitl serve [-h]")
    for text in (
        "ssh -L 8000:127.0.0.1:8000 HOST",
        "--allow-remote",
        "hitl serve ~/loops",
        "127.0.0.1",
        "needs a token",
        "$HITL_SERVE_TOKEN",
    ):
        assert text in result.stdout, text
    assert (
        "hitl serve [PATH...]"
        in subprocess.run(
            [sys.executable, "-m", "hitl_tui", "--help"], capture_output=True, text=True, check=True
        ).stdout
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "myhost.example"])
def test_another_address_needs_allow_remote(loops: Path, host: str):
    """Nothing listens: one usage line, exit 2."""
    port = free_port()
    result = run("--host", host, "--port", port, cwd=loops)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"hitl: --host {host}: other machines could answer blocks; add --allow-remote to mean "
        "it, or use an SSH tunnel (see 'hitl serve --help')\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free: nothing was started


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "0"], "argument --port: not a port number (1-65535): 0"),
        (["--port", "http"], "argument --port: not a port number: 'http'"),
        (["nowhere"], "no such folder: nowhere"),
    ],
)
def test_bad_usage_is_one_line(loops: Path, args: list[str], message: str):
    result = run(*args, cwd=loops)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"hitl: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_the_url_line_the_guards_and_ctrl_c(loops: Path, serve):
    port = free_port()
    served = serve("--port", port, cwd=loops)
    url = f"http://127.0.0.1:{port}"
    assert served.first_line() == (
        f"hitl: serving 1 repository at {url}/?token={TOKEN} (Ctrl+C stops)\n"
    )
    status, page = get(f"{url}/?token={TOKEN}")
    assert status == 200
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws/{TOKEN}"' in page
    # Through a tunnel on another local port the page names the address the browser used.
    status, page = get(f"{url}/?token={TOKEN}", {"Host": "localhost:9000"})
    assert status == 200
    assert f'data-session-websocket-url="ws://localhost:9000/ws/{TOKEN}"' in page
    # DNS rebinding: a site's name resolved to 127.0.0.1 gets no page, token or not.
    status, page = get(f"{url}/?token={TOKEN}", {"Host": f"evil.example:{port}"})
    assert status == 403
    assert "127.0.0.1" in page
    # Another site open in the same browser cannot drive the app through the websocket.
    ws = f"ws://127.0.0.1:{port}/ws/{TOKEN}"
    assert asyncio.run(websocket_status(ws, "http://evil.example")) == 403
    code, err = served.stop()
    assert (code, err) == (0, "hitl: stopped\n")


async def websocket_status(url: str, origin: str, headers: dict[str, str] | None = None) -> int:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers={**(headers or {}), "Origin": origin}):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_localhost_needs_no_flag(loops: Path, serve):
    port = free_port()
    served = serve("--host", "localhost", "--port", port, cwd=loops)
    assert (
        served.first_line()
        == f"hitl: serving 1 repository at http://localhost:{port}/?token={TOKEN} (Ctrl+C stops)\n"
    )
    assert get(f"http://localhost:{port}/?token={TOKEN}")[0] == 200
    assert served.stop() == (0, "hitl: stopped\n")  # no warning


def test_allow_remote_warns_and_names_the_host(loops: Path, serve):
    port = free_port()
    served = serve("--host", "0.0.0.0", "--allow-remote", "--port", port, cwd=loops)
    line = served.first_line()
    address = f"http://{socket.gethostname()}:{port}/?token={TOKEN}"
    assert line == f"hitl: serving 1 repository at {address} (Ctrl+C stops)\n"
    assert get(f"http://127.0.0.1:{port}/?token={TOKEN}", {"Host": f"10.0.0.5:{port}"})[0] == 200
    code, err = served.stop()
    assert code == 0
    assert err == (
        "hitl: warning: serving on 0.0.0.0 over plain http: the token crosses the network "
        "readable, and whoever reads it can answer blocks and write to the repositories\n"
        "hitl: stopped\n"
    )


def test_without_the_token_nothing_is_served(loops: Path, serve):
    """Another user of this machine reaches 127.0.0.1 too: no page, no session, no download
    without the token; a wrong one is no better. The page holds it in its websocket's path,
    sets no cookie (a browser would send a 127.0.0.1 cookie to every port there) and tells
    the browser never to pass its address on."""
    port = free_port()
    served = serve("--port", port, cwd=loops)
    served.first_line()
    url = f"http://127.0.0.1:{port}"
    refused = "hitl serve needs its token: open the address it printed (http://...?token=...)"
    for page in ("/", "/?token=wrong-token-0123456789", "/?token=", "/download/x"):
        assert get(url + page) == (403, refused), page
    for ws in ("/ws", "/ws/wrong-token-0123456789", "/ws?token=wrong-token-0123456789"):
        assert asyncio.run(websocket_status(f"ws://127.0.0.1:{port}{ws}", url)) == 403, ws
    status, headers = get_raw(f"{url}/?token={TOKEN}")
    assert status == 200 and "Set-Cookie" not in headers
    assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
    assert asyncio.run(websocket_status(f"ws://127.0.0.1:{port}/ws/{TOKEN}", url)) == 101
    assert served.stop() == (0, "hitl: stopped\n")


def test_a_new_token_each_start_unless_the_environment_sets_one(loops: Path, serve):
    tokens = []
    for _ in range(2):
        served = serve("--port", free_port(), cwd=loops, token=None)
        tokens.append(served.first_line().split("?token=")[1].split(" ")[0])
        served.stop()
    assert tokens[0] != tokens[1] and all(len(t) >= 32 for t in tokens)
    env = {**os.environ, "HITL_SERVE_TOKEN": "short"}
    result = subprocess.run(
        [sys.executable, "-m", "hitl_tui", "serve", "--port", str(free_port())],
        cwd=loops,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "hitl: $HITL_SERVE_TOKEN must be 16 to 256 of A-Z a-z 0-9 _ - (a URL's word)\n"
    )


def test_a_taken_port_is_one_line(loops: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("--port", port, cwd=loops)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(f"hitl: cannot listen on 127.0.0.1:{port}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# -- in a real browser ---------------------------------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: Before the page's script runs: keep the xterm.js Terminal textual.js makes (it assigns it to
#: `this.terminal`), so the test reads the screen's text from its buffer (the canvas renderer
#: puts no text in the DOM).
KEEP_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {
      value, writable: true, configurable: true, enumerable: true,
    });
    if (value && value.buffer && value.buffer.active) { window.__hitlTerminal = value; }
  },
});
"""

SCREEN_TEXT = """(() => {
  const terminal = window.__hitlTerminal;
  if (!terminal) { return null; }
  const buffer = terminal.buffer.active, lines = [];
  for (let i = 0; i < buffer.length; i++) {
    const line = buffer.getLine(i);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
})()"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, ws, session: str | None, ids: itertools.count, events: list) -> None:
        self.ws = ws
        self.session = session  # None: the browser itself
        self.ids = ids
        #: Every DevTools event read so far (the page's requests among them), in order.
        self.events = events

    async def call(self, method: str, **params) -> dict:
        number = next(self.ids)
        message = {"id": number, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        await self.ws.send_json(message)
        while True:
            reply = json.loads((await self.ws.receive(timeout=WAIT)).data)
            if reply.get("id") == number:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    async def screen(self) -> str:
        result = await self.call("Runtime.evaluate", expression=SCREEN_TEXT, returnByValue=True)
        return result["result"].get("value") or ""

    async def seen(self, text: str, seconds: float) -> bool:
        """Whether `text` is on the page's screen within `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if text in await self.screen():
                return True
            await asyncio.sleep(0.1)
        return False

    async def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT
        screen = ""
        while time.monotonic() < deadline:
            screen = await self.screen()
            if text in screen:
                return screen
            await asyncio.sleep(0.1)
        where = await self.call(
            "Runtime.evaluate",
            expression="location.href + ' body.class=' + document.body.className",
            returnByValue=True,
        )
        page = where["result"].get("value")
        pytest.fail(f"{text!r} never on the page's screen ({page}); it shows:\n{screen}")

    async def press(self, key: str, ctrl: bool = False) -> None:
        """One key (a letter, a digit, or Escape), as the keyboard sends it to the focus."""
        if key == "Escape":
            common = {"key": key, "code": key, "windowsVirtualKeyCode": 27}
        else:
            code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
            common = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper())}
        if ctrl:
            common["modifiers"] = 2
        text = {} if ctrl or key == "Escape" else {"text": key}
        await self.call("Input.dispatchKeyEvent", type="keyDown", **text, **common)
        await self.call("Input.dispatchKeyEvent", type="keyUp", **common)


async def open_page(url: str, profile: Path, drive) -> None:
    import aiohttp

    proc = subprocess.Popen(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its helpers (renderer, GPU, crashpad) in one process group
    )
    try:
        active = profile / "DevToolsActivePort"  # Chromium writes its port and path there
        deadline = time.monotonic() + WAIT
        while len(active.read_text().split() if active.exists() else ()) < 2:
            assert proc.poll() is None, f"chromium exited with {proc.returncode}"
            assert time.monotonic() < deadline, "chromium never opened its DevTools port"
            await asyncio.sleep(0.1)
        port, path = active.read_text().split()[:2]
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0) as ws,
        ):
            ids, events = itertools.count(1), []
            browser = Browser(ws, None, ids, events)
            target = await browser.call("Target.createTarget", url="about:blank")
            attached = await browser.call(
                "Target.attachToTarget", targetId=target["targetId"], flatten=True
            )
            page = Browser(ws, attached["sessionId"], ids, events)
            await page.call("Page.enable")
            await page.call("Network.enable")  # every request the page makes, from the first
            await page.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_TERMINAL)
            await page.call("Page.navigate", url=url)
            await drive(page)
    finally:
        # The whole group: a helper that outlived the browser kept writing into the profile
        # while it was being removed ("Directory not empty").
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def apps_running(folder: Path, environ: bool = False) -> list[str]:
    """The command lines of the hitl apps running on `folder` (the sessions' processes), or
    (`environ`) their environments."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes().decode(errors="replace") if environ else ""
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv)
        if "hitl_tui" in line and str(folder) in line and " serve " not in line:
            found.append(env if environ else line)
    return found


@pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)")
def test_a_block_answered_in_the_browser(
    loops: Path, serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The page loads, the question is on its screen, `2` then `y` answer it: BLOCKED.md is
    gone and PROMPT.md has the decision, on disk. Ctrl+C then ends the open session at once."""
    ran = tmp_path / "ran"
    spy = tmp_path / "spy.sh"
    spy.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{ran}'\n")
    spy.chmod(0o755)
    monkeypatch.setenv("SHELL", str(spy))
    monkeypatch.setenv("VISUAL", str(spy))
    shop = loops / "shop"
    before = (shop / "PROMPT.md").read_text()
    port = free_port()
    served = serve("--port", port, loops, cwd=tmp_path, token=None)  # a new one, printed
    line = served.first_line()
    printed = line.split(" at ", 1)[1].removesuffix(" (Ctrl+C stops)\n")
    assert printed.startswith(f"http://127.0.0.1:{port}/?token=")
    stopped: list[tuple[int, str, float]] = []

    async def drive(page: Browser) -> None:
        await page.wait_for(QUESTION[:30])  # the list's row and the Question pane
        await page.wait_for("1 block in 1 repo")
        assert apps_running(loops)  # this page's app (and the shell that started it)
        await page.call("Runtime.evaluate", expression="window.__hitlTerminal.focus()")
        # `t` (a shell) and Ctrl+E (the editor) need a terminal of their own: they say so.
        await page.press("t")
        await page.wait_for("shop: a shell needs a")
        await page.press("o")
        await page.wait_for("answer in your own words")
        # (In one clean-clone run the Ctrl+E never reached the app: no toast in 90 s. Pressed
        # again, at most twice more; an app that ignores Ctrl+E still fails all three.)
        for _ in range(3):
            await page.press("e", ctrl=True)
            if await page.seen("The editor needs a", 10):
                break
        await page.wait_for("The editor needs a")
        await page.press("Escape")
        await page.wait_for("1 block in 1 repo")
        await page.press("2")
        await page.wait_for("Apply (Enter / y)")  # the preview of choice B
        await page.press("y")
        await page.wait_for("hitl · no open blocks")  # the header, once the answer is written
        deadline = time.monotonic() + WAIT
        while (shop / "BLOCKED.md").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        # Ctrl+C with the page still open: the server ends the session, the page says so.
        began = time.monotonic()
        code, err = await asyncio.to_thread(served.stop)
        stopped.append((code, err, time.monotonic() - began))
        closed = "document.body.classList.contains('-closed')"
        while time.monotonic() < deadline:
            result = await page.call("Runtime.evaluate", expression=closed, returnByValue=True)
            if result["result"].get("value"):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the page never showed that its session ended")

    with tempfile.TemporaryDirectory(
        prefix="hitl-chromium-", ignore_cleanup_errors=True
    ) as profile:
        asyncio.run(open_page(printed, Path(profile), drive))
    assert not (shop / "BLOCKED.md").exists()
    after = (shop / "PROMPT.md").read_text()
    assert after.startswith(before.rstrip("\n"))
    assert "## Decisions" in after
    assert f"{QUESTION}, or keep them for 7 years? → B) Keep invoices" in after
    [(code, err, seconds)] = stopped
    assert (code, err) == (0, "hitl: stopped\n")
    assert seconds < 8, f"Ctrl+C took {seconds:.1f} s with a session open"
    assert apps_running(loops) == []
    assert not ran.exists(), ran.read_text()  # no shell, no editor ran blind behind the page


#: The characters on the page's screen that no font the page can use draws: each is drawn with
#: the terminal's font list on a canvas (xterm.js draws its glyphs the same way), and one that
#: comes out as the box drawn for a code point no font has (U+10FFFD, private use) is missing.
MISSING_GLYPHS = """(async () => {
  const terminal = window.__hitlTerminal, size = 32;
  const font = `${size}px ${terminal.options.fontFamily}`;
  await document.fonts.load(font, "hitl");
  const canvas = document.createElement("canvas");
  canvas.width = 4 * size;
  canvas.height = 2 * size;
  const context = canvas.getContext("2d", {willReadFrequently: true});
  const drawn = (character) => {
    context.clearRect(0, 0, canvas.width, canvas.height);
    context.font = font;
    context.fillStyle = "#000";
    context.fillText(character, size / 2, 1.5 * size);
    return context.getImageData(0, 0, canvas.width, canvas.height).data.join();
  };
  const box = drawn("\\u{10FFFD}");
  const buffer = terminal.buffer.active, seen = new Set();
  for (let i = 0; i < buffer.length; i++) {
    for (const character of buffer.getLine(i).translateToString(true)) { seen.add(character); }
  }
  return [...seen].filter((c) => c.trim() && drawn(c) === box).join("");
})()"""


def requests_of(events: list[dict]) -> dict[str, dict]:
    """The page's requests by id: url, status (None before a response), failed (the error),
    ended; and its websockets' addresses (`ws:` ids)."""
    found: dict[str, dict] = {}
    for event in events:
        params = event.get("params", {})
        method = event["method"]
        if method == "Network.requestWillBeSent":
            found[params["requestId"]] = {
                "url": params["request"]["url"],
                "status": None,
                "failed": None,
                "ended": False,
            }
        elif method == "Network.webSocketCreated":
            found["ws:" + params["requestId"]] = {
                "url": params["url"],
                "status": None,
                "failed": None,
                "ended": True,
            }
        elif method == "Network.responseReceived" and params["requestId"] in found:
            found[params["requestId"]]["status"] = params["response"]["status"]
        elif method == "Network.loadingFinished" and params["requestId"] in found:
            found[params["requestId"]]["ended"] = True
        elif method == "Network.loadingFailed" and params["requestId"] in found:
            found[params["requestId"]].update(failed=params["errorText"], ended=True)
    return found


@pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)")
def test_the_page_calls_no_one(loops: Path, serve, tmp_path: Path):
    """Offline, the page is whole: every request it makes (its font and its icon included) goes
    to this server and gets its file, none leaves the machine (a font of fonts.googleapis.com
    did), and every character on its screen, the palette's included, has a glyph."""
    port = free_port()
    served = serve("--port", port, loops, cwd=tmp_path)
    served.first_line()
    seen: dict[str, object] = {}

    async def drive(page: Browser) -> None:
        await page.wait_for("1 block in 1 repo")
        await page.call("Runtime.evaluate", expression="window.__hitlTerminal.focus()")
        await page.press("p", ctrl=True)
        seen["palette"] = await page.wait_for("Search for commands")
        result = await page.call(
            "Runtime.evaluate", expression=MISSING_GLYPHS, awaitPromise=True, returnByValue=True
        )
        seen["missing"] = result["result"].get("value")
        # Until the browser has asked for the page's icon (after the page loaded) and every
        # request has its answer.
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            found = requests_of(page.events)
            icon = any(urlsplit(r["url"]).path.startswith("/favicon") for r in found.values())
            if icon and all(r["ended"] for r in found.values()):
                break
            await page.call("Runtime.evaluate", expression="0")  # reads the events meanwhile
            await asyncio.sleep(0.1)
        seen["requests"] = requests_of(page.events)

    # (In tmp_path: Chromium's helpers may still write there as the test ends.)
    asyncio.run(open_page(f"http://127.0.0.1:{port}/?token={TOKEN}", tmp_path / "chromium", drive))
    # The icon needs no token: a browser asks for it on a refusal's page too.
    status, headers = get_raw(f"http://127.0.0.1:{port}/favicon.ico")
    assert (status, headers["Content-Type"]) == (200, "image/svg+xml")
    assert served.stop() == (0, "hitl: stopped\n")
    requests = seen["requests"]
    assert isinstance(requests, dict)
    shown = "\n".join(f"{r['url']} {r['status']} {r['failed'] or ''}" for r in requests.values())
    here = (f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/")
    assert all(r["url"].startswith(here) for r in requests.values()), shown
    assert all(r["failed"] is None for r in requests.values()), shown
    assert all(r["status"] < 400 for r in requests.values() if r["status"] is not None), shown
    paths = {urlsplit(r["url"]).path: r["status"] for r in requests.values()}
    assert paths.get("/favicon.ico") == 200, shown
    # The terminal's own font, from this server: the screen is drawn in it, not a stand-in.
    fonts = [path for path, status in paths.items() if "/fonts/" in path and status == 200]
    assert any("RobotoMono" in path for path in fonts), shown
    assert seen["missing"] == "", f"no glyph for {seen['missing']!r} on:\n{seen['palette']}"


# -- the guards, request by request (no server process) ----------------------------------------


def refusal(bind: str, headers: dict[str, str]) -> str | None:
    """Why a server listening on `bind` refuses a request with `headers`, or None."""
    from aiohttp.test_utils import make_mocked_request

    from hitl_tui.cli import serve as serve_cli

    server = serve_cli._server_class()(
        "true", bind, 8000, "1 repository", serve_cli.listens_on_loopback(bind), TOKEN
    )
    return server._refused(make_mocked_request("GET", "/ws", headers=headers))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1.evil.example:8000",
        "localhost.evil.example:8000",
        "evil.example@127.0.0.1:8000",  # no browser sends it; a parser could be fooled by it
        "127.0.0.1:8000/x",
        "0.0.0.0:8000",
        "",
    ],
)
def test_a_foreign_host_is_refused_on_loopback(host: str):
    assert (refusal("127.0.0.1", {"Host": host}) or "").startswith("hitl serves 127.0.0.1:8000")


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "LOCALHOST:9000", "[::1]:8000", "localhost"])
def test_this_machine_is_served_on_loopback(host: str):
    assert refusal("127.0.0.1", {"Host": host}) is None


def test_dns_rebinding_is_refused_with_allow_remote_too():
    """A site's name resolved to this machine's address, its page's own Origin: with
    --allow-remote the Host is still checked (it was not: any site could drive the app)."""
    why = refusal("0.0.0.0", {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"})
    assert why is not None and "evil.example" in why
    assert refusal("0.0.0.0", {"Host": "10.0.0.5:8000", "Origin": "http://10.0.0.5:8000"}) is None
    name = socket.gethostname().upper()  # the name the URL line shows, in any case
    assert refusal("0.0.0.0", {"Host": f"{name}:8000", "Origin": f"http://{name}:8000"}) is None


@pytest.mark.parametrize("origin", ["null", "http://evil.example", "http://127.0.0.1:9999"])
def test_a_foreign_origin_is_refused(origin: str):
    assert refusal("127.0.0.1", {"Host": "127.0.0.1:8000", "Origin": origin}) == (
        "a page of another site cannot drive hitl"
    )


@pytest.mark.parametrize(("host", "loopback"), [("127.1", True), ("0", False), ("::1", True)])
def test_what_host_listens_on_decides(host: str, loopback: bool):
    from hitl_tui.cli.serve import listens_on_loopback

    assert listens_on_loopback(host) is loopback


def test_host_in_brackets_listens(loops: Path, serve):
    port = free_port()
    served = serve("--host", "[::1]", "--port", port, cwd=loops)
    assert served.first_line() == (
        f"hitl: serving 1 repository at http://[::1]:{port}/?token={TOKEN} (Ctrl+C stops)\n"
    )
    assert served.stop() == (0, "hitl: stopped\n")


def test_sigterm_with_two_sessions_open_leaves_no_app_running(loops: Path, serve):
    """Two websocket sessions (as two tabs open them) run two apps; SIGTERM (a service
    manager's stop) ends the server and both apps, as Ctrl+C does."""
    import aiohttp

    port = free_port()
    served = serve(loops, "--port", port, cwd=loops)
    served.first_line()
    url = f"ws://127.0.0.1:{port}/ws/{TOKEN}?width=80&height=24"
    origin = f"http://127.0.0.1:{port}"

    async def two_sessions() -> tuple[int, list[str]]:
        async with aiohttp.ClientSession() as session:
            headers = {"Origin": origin}
            tabs = [await session.ws_connect(url, headers=headers) for _ in range(2)]
            for tab in tabs:
                await tab.send_json(["resize", {"width": 80, "height": 24}])
            ends = time.monotonic() + WAIT
            while len(apps_running(loops)) < 2 and time.monotonic() < ends:
                await asyncio.sleep(0.2)
            running = apps_running(loops)
            # The token is the server's: the sessions (and what they run) never see it.
            environs = apps_running(loops, environ=True)
            assert environs and not any("HITL_SERVE_TOKEN" in e for e in environs)
            served.proc.send_signal(signal.SIGTERM)
            for tab in tabs:  # the server closes each session's websocket
                while not tab.closed and time.monotonic() < ends:
                    try:
                        await asyncio.wait_for(tab.receive(), 1)
                    except TimeoutError:
                        pass
            return await asyncio.to_thread(served.proc.wait, WAIT), running

    code, running = asyncio.run(two_sessions())
    assert len(running) == 2, running
    assert code == 0
    ends = time.monotonic() + 10
    while apps_running(loops) and time.monotonic() < ends:
        time.sleep(0.2)
    assert apps_running(loops) == []


def test_sigkill_of_the_server_ends_its_session_apps(loops: Path, serve):
    """Issue 23: a server killed with SIGKILL (no handler runs) left its tab apps running, still
    taking locks and claiming notices, for as long as nothing made them write. Each ends with
    the server (PR_SET_PDEATHSIG, set by the app itself for the server that started it)."""
    import aiohttp

    port = free_port()
    served = serve(loops, "--port", port, cwd=loops)
    served.first_line()
    url = f"ws://127.0.0.1:{port}/ws/{TOKEN}?width=80&height=24"

    async def killed_with_a_session_open() -> list[str]:
        async with aiohttp.ClientSession() as session:
            tab = await session.ws_connect(url, headers={"Origin": f"http://127.0.0.1:{port}"})
            await tab.send_json(["resize", {"width": 80, "height": 24}])
            ends = time.monotonic() + WAIT
            while not apps_running(loops) and time.monotonic() < ends:
                await asyncio.sleep(0.2)
            running = apps_running(loops)
            # The app is up (its screen drawn) before the kill: not caught starting.
            while time.monotonic() < ends:
                try:
                    message = await asyncio.wait_for(tab.receive(), 1)
                except TimeoutError:
                    continue
                if message.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                    pytest.fail(f"the session ended before the app drew its screen: {message}")
                if "shop" in str(message.data):
                    break
            served.proc.kill()
            await asyncio.to_thread(served.proc.wait, WAIT)
            return running

    running = asyncio.run(killed_with_a_session_open())
    assert len(running) == 1, running
    ends = time.monotonic() + 10
    while apps_running(loops) and time.monotonic() < ends:
        time.sleep(0.1)
    left = app_pids(loops)
    for pid in left:  # never leave one behind for the next test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "the session's app outlived the server killed with SIGKILL"


def app_pids(folder: Path) -> list[int]:
    """The pids of the hitl apps running on `folder` (see apps_running)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        line = " ".join(argv)
        if "hitl_tui" in line and str(folder) in line and " serve " not in line:
            found.append(int(proc.name))
    return found


@pytest.mark.parametrize("served_by", ["1", "999999999", "x"])
def test_served_by_set_outside_a_session_does_not_end_hitl(loops: Path, served_by: str):
    """Review of issue 23: HITL_SERVED_BY in the environment of a plain run (an agent's, a
    shell's: anyone can set it) made every hitl command (`list`, `guard`, the app itself) exit
    1 at once, saying nothing. Only a session app of `hitl serve` (the web driver, set by the
    same server) ends when the pid it names is not its parent."""
    env = {**os.environ, "PYTHONUTF8": "1", "HITL_SERVED_BY": served_by}
    env.pop("TEXTUAL_DRIVER", None)
    done = subprocess.run(
        [sys.executable, "-m", "hitl_tui", "list", str(loops)],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT,
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert "shop" in done.stdout, done.stdout
