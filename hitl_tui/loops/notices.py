"""Notices to the operator wherever they are: a new block, an answer whose loop did not resume.

The app rings the bell and toasts; this module is everything else, without Textual: the text
of a notice (one per burst: "12 new blocks in 5 repos: shop, api, …"), made plain, and the
channels of the config's `[notify]` table:

- `desktop`: `notify-send` (summary and body; the body escaped for Pango markup, which most
  notification servers render), where there is a desktop session (`"auto"`), always, or never;
- `terminal`: the terminal's own notification escape, OSC 9, OSC 777 or OSC 99 (kitty), chosen
  from `$TERM` / `$TERM_PROGRAM` and wrapped for tmux's passthrough under `$TMUX` (`osc`; the
  app writes it to its terminal, which also works over SSH). `"auto"` writes it only to a
  terminal known to show it (some print an escape they do not know as text);
- `command`: an argument list run with the notice on its standard input (ntfy, an SMS
  gateway, a pager), and `webhook` (or `webhook_env`): a Slack-style `{"text": ...}` POST.
  Both are escalate's own channel code (`notify.run_with_stdin`, `notify.post_slack`).

Every hitl of the operator's (two terminals, the browser tabs of `hitl serve`) sees the same
new block, and the same answer turn late; the channels they share (desktop, command, webhook)
get its notice once: each block of a notice (`shared_new`), and each late answer (`shared_late`:
its journal entry and the deadline it missed) is claimed in `notified.json` in the state folder
first (`claim`), and only what no other hitl claimed in the last day is sent. (One hitl turns an
answer late, `ResumeBook.due`, but every hitl shows it, and each showed it with a notice.) The
terminal's escape goes to each app's own terminal. A block an undo brings back is not new: the
undo claims it for every channel first (`hush`), before its file is back.

Agent text arrives plain and bounded in every channel: whitespace collapsed, escape sequences
and control characters removed, at most BODY_LIMIT characters. A channel that fails gives one
line (`send`'s result) that never holds the webhook URL or the command's arguments.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from hitl_tui.agent import channels as notify
from hitl_tui.model import Block, UsageError
from hitl_tui.state import files as statefile
from hitl_tui.textio import one_line, printable

#: What a notice can be about: `[notify] on` picks among them.
KINDS = ("new", "not-resumed")
#: The longest body of a notice, in characters (a 1 MB question is cut to this).
BODY_LIMIT = 300
#: Repos (or blocks) named in a burst's notice; the rest are counted.
NAMES = 5
#: Seconds each channel may take, by default (`[notify] timeout`).
DEFAULT_TIMEOUT = 5.0
#: The terminal escapes `terminal` may name; "auto" and True pick one from the environment.
FORMS = ("osc9", "osc777", "osc99")
#: Environment variables that say there is a desktop session to notify.
DESKTOP_VARS = ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")

_KEYS = ("command", "desktop", "on", "terminal", "timeout", "webhook", "webhook_env")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class NoticeConfig:
    """`[notify]`, validated (`from_config`). The webhook and the command's arguments may
    hold secrets (a key, a token): neither is ever in a repr."""

    #: "auto": only with a desktop session and notify-send on PATH; True; False.
    desktop: str | bool = "auto"
    #: "auto": the escape of a terminal known to show one, else none; True: always, the
    #: likeliest (OSC 9 when unknown); one of FORMS; False: none.
    terminal: str | bool = "auto"
    command: tuple[str, ...] = field(default=(), repr=False)
    webhook: str | None = field(default=None, repr=False)
    #: The name of an environment variable holding the webhook URL (read when sending).
    webhook_env: str | None = None
    on: frozenset[str] = frozenset(KINDS)
    timeout: float = DEFAULT_TIMEOUT

    def wants(self, kind: str) -> bool:
        return kind in self.on


@dataclass(frozen=True)
class Notice:
    """One notice: what it is about (KINDS), a short fixed title, and a plain one-line body."""

    kind: str
    title: str
    body: str

    @property
    def line(self) -> str:
        """The notice in one line, for channels without a title (OSC 9, a command, a webhook)."""
        return f"hitl: {self.body}"


class Late(Protocol):
    """An answer whose loop did not resume (resume.Waiting)."""

    @property
    def block_id(self) -> str: ...

    @property
    def id(self) -> str: ...

    @property
    def deadline(self) -> datetime: ...


# -- one notice per item, whichever of the operator's hitl sends it ---------------------------

NOTIFIED_FILE = "notified.json"
NOTIFIED_FORMAT = 1
NOTIFIED_MAX_BYTES = 4 << 20
#: How long a claimed item is remembered (a block that stays open is not notified again).
NOTIFIED_KEEP = timedelta(hours=24)
#: The most items remembered (the newest): a day of many bursts stays a small file.
NOTIFIED_MAX = 20_000


def _digest(key: str) -> str:
    """What the file keeps of a key: short, ASCII, any path's bytes (undecodable ones, lone
    surrogates) included."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def claim(
    keys: Sequence[str], now: datetime | None = None, hushed: Mapping[str, str] | None = None
) -> set[str]:
    """Those of `keys` no hitl of this operator claimed in the last NOTIFIED_KEEP, now
    claimed (under the file's lock: of two apps at once, one sends). A key whose `hushed` key
    (`hush`: claimed for every channel) is claimed is not this app's either. Without a usable
    state folder every key is this app's to send."""
    path = statefile.in_state(NOTIFIED_FILE)
    if path is None or not keys:
        return set(keys)
    now = (now or datetime.now(UTC)).astimezone(UTC)  # ISO 8601 in UTC sorts as time
    fresh: set[str] = set()

    def edit(current: dict[str, Any]) -> bool:
        sent = current.get("sent")
        cutoff = (now - NOTIFIED_KEEP).isoformat()
        kept = {
            k: t
            for k, t in (sent.items() if isinstance(sent, dict) else ())
            if isinstance(k, str) and isinstance(t, str) and t >= cutoff
        }
        for key in keys:
            digest = _digest(key)
            quiet = hushed is not None and key in hushed and _digest(hushed[key]) in kept
            if digest not in kept and not quiet:
                kept[digest] = now.isoformat()
                fresh.add(key)
        newest = sorted(kept.items(), key=lambda kv: kv[1])[-NOTIFIED_MAX:]
        current["sent"] = dict(newest)
        return True

    try:
        statefile.update(path, NOTIFIED_FORMAT, NOTIFIED_MAX_BYTES, edit)
    except Exception:  # a notice is never lost to its memory: this app sends it
        return set(keys)
    return fresh


@dataclass(frozen=True)
class Shared:
    """A notice for the shared channels, made of the items this app claims (`claimed`)."""

    keys: tuple[str, ...]
    items: tuple[Any, ...]
    make: Callable[[Sequence[Any]], Notice]

    def claimed(self, channels: Sequence[str], now: datetime | None = None) -> list[Any]:
        """For each of `channels` (`channel_id`s: two apps whose channels differ each send on
        their own), the notice of the items no other hitl sent on it, or None: there are
        none. One claim for all of them."""
        keys = {(channel, key): f"{channel} {key}" for channel in channels for key in self.keys}
        hushed = {f"{channel} {key}": f"{ANY} {key}" for channel, key in keys}
        fresh = claim(list(keys.values()), now, hushed)
        notices = []
        for channel in channels:
            chosen = [
                item
                for key, item in zip(self.keys, self.items, strict=True)
                if keys[channel, key] in fresh
            ]
            notices.append(self.make(chosen) if chosen else None)
        return notices


def channel_id(name: str, cfg: NoticeConfig, env: Mapping[str, str]) -> str:
    """Which `name` channel this is, whichever app sends on it: the desktop, this command,
    this webhook (its URL never kept: a digest)."""
    if name == "command":
        return "command:" + _digest("\0".join(cfg.command))
    if name == "webhook":
        url = cfg.webhook or (env.get(cfg.webhook_env, "") if cfg.webhook_env else "")
        return "webhook:" + _digest(url)
    return name


#: The channel of a claim for every channel (`hush`).
ANY = "*"


def new_key(source: str, path: object, fingerprint: str, since: datetime) -> str:
    """What a new block is claimed as: its bytes where they are, since it began (the same
    question asked again later is a new block)."""
    return f"new {source} {path} {fingerprint} {since.astimezone(UTC).isoformat()}"


def shared_new(blocks: Sequence[Block]) -> Shared:
    """`new_blocks` for the shared channels, each block claimed as `new_key`."""
    keys = tuple(new_key(b.source, b.path, b.fingerprint, b.since) for b in blocks)
    return Shared(keys, tuple(blocks), new_blocks)


def shared_late(records: Sequence[Late]) -> Shared:
    """`not_resumed` for the shared channels: an answer (its journal entry, else its block)
    and the deadline it missed (after a restart, a new deadline is a new notice)."""
    keys = tuple(f"late {r.id} {r.deadline.astimezone(UTC).isoformat()}" for r in records)
    return Shared(keys, tuple(records), not_resumed)


def hush(keys: Sequence[str], now: datetime | None = None) -> None:
    """Claim `keys` (`new_key`s) for every channel of every hitl of the operator's: nothing
    is sent for them (a block an undo brings back, whose first notice was sent or not)."""
    claim([f"{ANY} {key}" for key in keys], now)


# -- the text ---------------------------------------------------------------------------------

#: Control characters removed outright (C0, DEL, C1): no escape sequence can start or end.
_CONTROLS = dict.fromkeys([*range(0x20), 0x7F, *range(0x80, 0xA0)])


def plain(text: str, limit: int = BODY_LIMIT) -> str:
    """`text` as plain, bounded, one-line text: whitespace collapsed, control characters (ESC,
    BEL, C0 and C1) removed, invisible direction marks shown as `printable` shows them, and cut
    to `limit` characters. The work is bounded too: a 1 MB question is cut first."""
    text = one_line(text[: limit * 8])
    text = one_line(printable(text.translate(_CONTROLS)))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES])
    more = len(names) - NAMES
    return shown + (f" and {more} more" if more > 0 else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def new_blocks(blocks: Sequence[Block]) -> Notice:
    """One notice for a burst: "shop: <question>" for one block, else "3 new blocks in 2 repos:
    shop, api"."""
    if len(blocks) == 1:
        block = blocks[0]
        repo = plain(block.repo_name, 80)
        label = repo if block.id == block.repo_name else f"{repo} {plain(block.id, 80)}"
        return Notice("new", "hitl: new block", plain(f"{label}: {block.one_line_question(400)}"))
    repos: list[str] = []
    for block in blocks:
        name = plain(block.repo_name, 80)
        if name not in repos:
            repos.append(name)
    body = f"{len(blocks)} new blocks in {_plural(len(repos), 'repo')}: {_names(repos)}"
    return Notice("new", f"hitl: {len(blocks)} new blocks", plain(body))


def not_resumed(records: Sequence[Late]) -> Notice:
    """One notice for the answers whose loops showed no sign in time."""
    ids = [plain(r.block_id, 80) for r in records]
    if len(ids) == 1:
        body = f"{ids[0]}: no sign of the loop since the answer"
    else:
        body = f"{len(ids)} answers not resumed: {_names(ids)}"
    return Notice("not-resumed", "hitl: not resumed", plain(body))


def pango(text: str) -> str:
    """`text` shown literally by a notification server that renders body markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the terminal's escape --------------------------------------------------------------------


def terminal_form(env: Mapping[str, str], guess: bool = True) -> str | None:
    """The notification escape the terminal most likely understands, or None (no terminal,
    or the Linux console). A terminal not recognised gets OSC 9 with `guess`, else None.
    Under tmux, `$TERM_PROGRAM` is tmux's: the outer terminal's own variables
    (KITTY_WINDOW_ID, ITERM_SESSION_ID, WEZTERM_PANE, VTE_VERSION) are what is left."""
    term = env.get("TERM", "")
    program = env.get("TERM_PROGRAM", "")
    if not term or term in ("dumb", "linux"):
        return None
    if env.get("KITTY_WINDOW_ID") or term == "xterm-kitty" or program == "kitty":
        return "osc99"
    if (
        program in ("iTerm.app", "WezTerm")
        or env.get("ITERM_SESSION_ID")
        or env.get("WEZTERM_PANE")
    ):
        return "osc9"
    if (
        term.startswith(("rxvt", "foot"))
        or program in ("ghostty", "foot")
        or term == "xterm-ghostty"
        or env.get("VTE_VERSION")
    ):
        return "osc777"
    return "osc9" if guess else None


def osc(notice: Notice, form: str, tmux: bool = False) -> str:
    """The escape sequence that shows `notice` as the terminal's own notification.

    The notice's text is plain already (no ESC, BEL or other control can end the sequence
    early); OSC 777 separates its fields with `;`, so a `;` in the text becomes `,`. Under tmux
    the sequence is wrapped in a DCS passthrough (its ESCs doubled), which tmux hands to the
    outer terminal when `allow-passthrough` is on.
    """
    title, body = plain(notice.title, 80), plain(notice.body)
    if form == "osc99":  # kitty: the title, then the body, of notification "hitl"
        seq = f"\x1b]99;i=hitl:d=0;{title}\x1b\\\x1b]99;i=hitl:d=1:p=body;{body}\x1b\\"
    elif form == "osc777":
        seq = f"\x1b]777;notify;{title.replace(';', ',')};{body.replace(';', ',')}\x07"
    else:  # OSC 9 (iTerm2, WezTerm, ...): one line; "hitl: " first, never ConEmu's "9;1;"
        seq = f"\x1b]9;{plain(notice.line)}\x07"
    if tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def terminal_escape(notice: Notice, cfg: NoticeConfig, env: Mapping[str, str]) -> str | None:
    """What the app writes to its terminal for `notice`, or None (off, or no terminal)."""
    if cfg.terminal is False:
        return None
    if cfg.terminal in FORMS:
        form: str | None = str(cfg.terminal)
    else:
        form = terminal_form(env, guess=cfg.terminal is True)
    if form is None:
        return None
    return osc(notice, form, tmux=bool(env.get("TMUX")))


# -- the other channels -----------------------------------------------------------------------


def desktop_on(cfg: NoticeConfig, env: Mapping[str, str]) -> bool:
    if cfg.desktop == "auto":
        session = any(env.get(name) for name in DESKTOP_VARS)
        return session and shutil.which("notify-send", path=env.get("PATH")) is not None
    return cfg.desktop is True


def channels(cfg: NoticeConfig, env: Mapping[str, str]) -> list[str]:
    """The channels `send` would use, besides the terminal's escape (the app's)."""
    found = ["desktop"] if desktop_on(cfg, env) else []
    if cfg.command:
        found.append("command")
    if cfg.webhook or cfg.webhook_env:
        found.append("webhook")
    return found


def send(
    notice: Notice,
    cfg: NoticeConfig,
    env: Mapping[str, str] | None = None,
    only: Sequence[str] | None = None,
) -> list[str]:
    """Send `notice` on every enabled channel at once (desktop, command, webhook; `only`
    those named), each within `cfg.timeout` s. Returns one line per channel that failed,
    free of secrets. Never raises."""
    env = os.environ if env is None else env
    secrets = [*cfg.command[1:], cfg.webhook or ""]
    if cfg.webhook_env:
        secrets.append(env.get(cfg.webhook_env, ""))
    senders = {"desktop": _desktop, "command": _command, "webhook": _webhook}
    wanted = [c for c in channels(cfg, env) if only is None or c in only]
    if not wanted:
        return []

    def one(name: str) -> str | None:
        try:
            senders[name](notice, cfg, env)
        except notify.ChannelFailed as exc:
            return f"{name}: {notify.scrub(str(exc), secrets)}"
        except Exception as exc:  # a soft failure by contract; its text might hold a secret
            return f"{name}: unexpected {type(exc).__name__}"
        return None

    # Daemon threads, not an executor's (the interpreter's exit waits for those): each channel
    # is bounded by its timeout, and the app's exit must not wait for one still running.
    results: list[str | None] = [None] * len(wanted)

    def run(index: int) -> None:
        results[index] = one(wanted[index])

    threads = [
        threading.Thread(target=run, args=(i,), name="hitl-notice", daemon=True)
        for i in range(len(wanted))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [r for r in results if r]


def send_shared(
    shared: Shared, cfg: NoticeConfig, env: Mapping[str, str] | None = None
) -> list[str]:
    """`send`, each channel getting the notice of what no other hitl sent on it (one claim
    for all; the channels with the same notice are sent it at once)."""
    env = os.environ if env is None else env
    names = channels(cfg, env)
    by_notice: dict[tuple[str, str], tuple[Notice, list[str]]] = {}
    claimed = shared.claimed([channel_id(name, cfg, env) for name in names])
    for name, notice in zip(names, claimed, strict=True):
        if notice is not None:
            by_notice.setdefault((notice.title, notice.body), (notice, []))[1].append(name)
    failed = []
    for notice, only in by_notice.values():
        failed += send(notice, cfg, env, only=only)
    return failed


def stop_all() -> None:
    """End the notices still being sent (notify-send, a command), as the app exits."""
    notify.kill_running()


def _desktop(notice: Notice, cfg: NoticeConfig, env: Mapping[str, str]) -> None:
    program = shutil.which("notify-send", path=env.get("PATH"))
    if program is None:
        raise notify.ChannelFailed("notify-send is not on PATH")
    argv = [program, "--app-name=hitl", "--", plain(notice.title, 80), pango(notice.body)]
    notify.run_with_stdin(argv, "", cfg.timeout, "notify-send")


def _command(notice: Notice, cfg: NoticeConfig, env: Mapping[str, str]) -> None:
    name = plain(os.path.basename(cfg.command[0]), 60) or "command"
    notify.run_with_stdin(cfg.command, notice.line, cfg.timeout, f"[notify] command {name}")


def _webhook(notice: Notice, cfg: NoticeConfig, env: Mapping[str, str]) -> None:
    url = cfg.webhook
    where = "[notify] webhook"
    if cfg.webhook_env:
        where = f"${cfg.webhook_env} ([notify] webhook_env)"
        url = (env.get(cfg.webhook_env) or "").strip()
        if not url:
            raise notify.ChannelFailed(f"${cfg.webhook_env} ([notify] webhook_env) is not set")
    assert url is not None
    notify.post_slack(url, notice.line, cfg.timeout, where)


# -- the config -------------------------------------------------------------------------------


def from_config(path: Path, table: object) -> NoticeConfig:
    """`[notify]` as a NoticeConfig; a UsageError naming the file and the key otherwise. An
    error never quotes the webhook or the command's arguments (they may hold secrets)."""

    def fail(text: str) -> UsageError:
        return UsageError(f"{path}: [notify]: {text}")

    if not isinstance(table, dict):
        raise UsageError(f"{path}: 'notify' must be a [notify] table (desktop = \"auto\", ...)")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        shown = printable(one_line(unknown[0]))[:40]
        raise fail(f"unknown key {shown!r} (known: {', '.join(_KEYS)})")
    desktop = table.get("desktop", "auto")
    if not isinstance(desktop, bool) and desktop != "auto":
        raise fail('desktop must be "auto", true or false')
    terminal = table.get("terminal", "auto")
    if not (isinstance(terminal, bool) or terminal == "auto" or terminal in FORMS):
        raise fail(f'terminal must be true, false, "auto" or one of {", ".join(FORMS)}')
    command = table.get("command", [])
    if not isinstance(command, list) or not all(
        isinstance(a, str) and "\0" not in a for a in command
    ):
        raise fail('command must be a list of arguments, like ["ntfy", "publish", "mytopic"]')
    if command and not command[0].strip():
        raise fail("command: its first argument (the program) is empty")
    webhook = table.get("webhook")
    if webhook is not None and (
        not isinstance(webhook, str) or not re.match(r"https?://[^\s/]", webhook.strip())
    ):
        raise fail("webhook must be an http(s) URL in quotes")
    webhook_env = table.get("webhook_env")
    if webhook_env is not None and (
        not isinstance(webhook_env, str) or not _ENV_NAME.match(webhook_env)
    ):
        raise fail('webhook_env must be the name of an environment variable, like "HITL_HOOK"')
    if webhook is not None and webhook_env is not None:
        raise fail("give webhook or webhook_env, not both")
    on = table.get("on", list(KINDS))
    if not isinstance(on, list) or not all(isinstance(k, str) for k in on):
        raise fail(f"on must be a list of {', '.join(repr(k) for k in KINDS)}")
    for kind in on:
        if kind not in KINDS:
            shown = printable(one_line(kind))[:40]
            raise fail(f"on: unknown {shown!r} (known: {', '.join(KINDS)})")
    timeout = table.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 60:
        raise fail("timeout must be a number of seconds, more than 0 and at most 60")
    return NoticeConfig(
        desktop=desktop,
        terminal=terminal,
        command=tuple(command),
        webhook=webhook.strip() if webhook else None,
        webhook_env=webhook_env,
        on=frozenset(on),
        timeout=float(timeout),
    )
