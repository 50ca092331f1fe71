"""The agent's side of an ask (`hitl mcp`): file a question or a permission request as an ask
file in the repository, wait for the operator's answer there, and hand it to the agent once.

Everything here is plain Python (the MCP server in `agent.mcp_server` is one client of it, the
tests another). The answer is read from the repository, so it reaches the agent wherever the
operator wrote it from: this machine's app or `hitl answer`, another machine over ssh, the
browser.

- `Asker.ask` files a question (`ask_operator`); `Asker.check` reads where an ask stands
  (`check_answer`), handing an answer over at most once as `delivered`.
- `Asker.approve` is Claude Code's permission prompt: a grant allows at once; an answer not
  yet handed over for the same tool and input is used once; else an open ask for it is
  waited on, or a new one filed.
- `Asker.wait` polls the ask's file (a stat every `POLL` seconds) until it is answered.

Every write goes through `repofs.RepoDir` (created with no-replace, or replaced only if the file
still holds the bytes read), never through a symlink, and never over bytes not read.

Layer: agent, beside escalate and guard.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from hitl_tui.answers.repofs import ConcurrentWrite, RepoDir
from hitl_tui.model import HitlError, UsageError
from hitl_tui.sources.asks import format as fmt
from hitl_tui.sources.asks import grants as grantfile
from hitl_tui.textio import printable

#: How often a waiting call looks at its ask's file (seconds): the answer reaches the agent
#: within this of being written.
POLL = 0.1
#: A waiting call reports progress this often (seconds), so a client that ends idle calls
#: (Claude Code's is 60 s) keeps it open.
TICK = 5.0
#: The longest an ask_operator call waits.
MAX_WAIT = 50.0
#: Delivered asks older than this are removed when a new ask is filed.
KEEP_DELIVERED = timedelta(days=7)


class AskError(UsageError):
    """Bad input from the agent, or no place to file it: one line, nothing written."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What `approve` answers Claude Code: allow (with the input) or deny (with a message)."""

    allow: bool
    message: str = ""
    #: The ask that decided it, if one did (None: a grant did).
    ask: str | None = None

    def to_json(self, tool_input: dict[str, Any]) -> dict[str, Any]:
        if self.allow:
            return {"behavior": "allow", "updatedInput": tool_input}
        return {"behavior": "deny", "message": self.message}


def _text(value: object, name: str, limit: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise AskError(f"{name} must be a string")
    if required and not value.strip():
        raise AskError(f"{name} is empty")
    if len(value) > limit:
        raise AskError(f"{name} is {len(value):,} characters (at most {limit:,})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AskError(f"{name} is not valid text (a lone surrogate)") from None
    return value


def _texts(value: object, name: str, count: int, limit: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AskError(f"{name} must be a list of strings")
    if len(value) > count:
        raise AskError(f"{name} has {len(value)} items (at most {count})")
    return [_text(item, f"{name}[{i}]", limit) for i, item in enumerate(value)]


def ask_id_of(given: str) -> str:
    """The ask id in `given`: the id as listed (`shop/ask-7k2m9q2x3c`) or its last part."""
    tail = given.strip().rsplit("/", 1)[-1]
    if not fmt.ID_RE.match(tail):
        raise AskError(f"not an ask id: {printable(given[:80])!r} (ids look like ask-7k2m9q2x3c)")
    return tail


class Asker:
    """One repository's asks, as the agent's side files and reads them."""

    def __init__(self, repo: Path, label: str | None = None, client: str = "") -> None:
        self.repo = Path(os.path.abspath(repo))
        #: What the repository's blocks are called in `hitl list` (`shop`, `team/shop`).
        self.label = label or self.repo.name
        #: The MCP client, as it named itself (`claude-code 2.1.332`), shown with each ask.
        self.client = client[: fmt.LIMITS["client"]]

    # -- paths -----------------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        return grantfile.asks_dir(self.repo)

    def _linked(self) -> bool:
        """`.hitl/` or its asks' folder is a symlink: hitl neither reads nor writes through it
        (another repository's answers and grants would be taken for this one's)."""
        return os.path.islink(self.repo / fmt.HITL_DIR) or os.path.islink(self.folder)

    def path_of(self, ask_id: str) -> Path:
        return self.folder / f"{ask_id_of(ask_id)}.json"

    def public_id(self, ask_id: str) -> str:
        """The id `hitl list` and `hitl answer` use for the ask."""
        return f"{self.label}/{ask_id}"

    # -- filing ----------------------------------------------------------------------------

    def ask(
        self,
        question: object,
        choices: object = None,
        context: object = "",
        attempted: object = None,
    ) -> fmt.Ask:
        """File a question; AskError (nothing written) for bad input."""
        limits = fmt.LIMITS
        fields: dict[str, Any] = {
            "kind": "question",
            "question": _text(question, "question", limits["question"], required=True),
            "context": _text(context if context is not None else "", "context", limits["context"]),
            "attempted": _texts(
                attempted, "attempted", limits["attempted"], limits["attempted_item"]
            ),
            "choices": [
                c for c in _texts(choices, "choices", limits["choices"], limits["choice"]) if c
            ],
        }
        return self._file(fields)

    def ask_permission(self, tool: object, tool_input: object, tool_use_id: object = "") -> fmt.Ask:
        """File a permission request for `tool` with `tool_input`."""
        name, data, use_id = self._checked_request(tool, tool_input, tool_use_id)
        return self._file(
            {
                "kind": "permission",
                "tool": name,
                "input": data,
                "input_sha": fmt.input_sha(data),
                "tool_use_id": use_id or None,
            }
        )

    def _checked_request(
        self, tool: object, tool_input: object, tool_use_id: object
    ) -> tuple[str, dict[str, Any], str]:
        name = _text(tool, "tool_name", fmt.LIMITS["tool_name"], required=True)
        if not isinstance(tool_input, dict):
            raise AskError("input must be an object")
        try:
            size = len(orjson.dumps(tool_input))
        except orjson.JSONEncodeError as exc:
            raise AskError(f"input is not JSON ({exc})") from None
        if size > fmt.LIMITS["input_bytes"]:
            most = fmt.LIMITS["input_bytes"]
            raise AskError(f"input is {size:,} bytes of JSON (at most {most:,})")
        use_id = _text(tool_use_id or "", "tool_use_id", fmt.LIMITS["tool_use_id"])
        return name, tool_input, use_id

    def _file(self, fields: dict[str, Any]) -> fmt.Ask:
        ask_id = fmt.new_id()
        now = datetime.now(UTC)
        record = {
            "hitl_ask": fmt.VERSION,
            "id": ask_id,
            "status": "open",
            "asked": now.isoformat(),
            "client": self.client or None,
            **fields,
        }
        data = fmt.render(record)
        self._make_folders()
        asks = self._read_all()
        if sum(1 for ask, _ in asks if ask.status == "open") >= fmt.MAX_OPEN:
            raise AskError(f"{self.label} already has {fmt.MAX_OPEN} open asks: answer some first")
        self._prune(asks, now)
        try:
            with RepoDir(self.repo) as rd:
                rd.replace(rd.spot(self.path_of(ask_id)), None, data)
        except OSError as exc:
            raise AskError(f"cannot write the ask: {exc.strerror or exc}") from None
        return fmt.parse(data)

    def _make_folders(self) -> None:
        """`.hitl/` (with its `.gitignore`) and `.hitl/asks/`, made inside the repository only:
        a symlink in their place is refused, never followed."""
        if not os.path.isdir(self.repo):
            raise AskError(f"not a folder: {printable(str(self.repo))}")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            top = os.open(self.repo, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise AskError(f"cannot open {printable(str(self.repo))}: {exc.strerror}") from None
        try:
            _mkdir_at(top, fmt.HITL_DIR)
            try:
                hitl = os.open(fmt.HITL_DIR, flags, dir_fd=top)
            except OSError as exc:
                raise AskError(
                    f"{fmt.HITL_DIR} in {printable(self.repo.name)} is not a folder hitl can use "
                    f"({exc.strerror}: a symlink is refused)"
                ) from None
            try:
                _mkdir_at(hitl, fmt.ASKS_DIR)
                os.close(os.open(fmt.ASKS_DIR, flags, dir_fd=hitl))
            except OSError as exc:
                raise AskError(
                    f"{fmt.HITL_DIR}/{fmt.ASKS_DIR} is not a folder hitl can use "
                    f"({exc.strerror}: a symlink is refused)"
                ) from None
            finally:
                os.close(hitl)
        finally:
            os.close(top)
        # Whenever it is missing (a `.hitl` made by hand or by an older hitl, or one whose
        # `.gitignore` was removed), never over one that is there: created with no-replace.
        ignore = self.repo / fmt.HITL_DIR / ".gitignore"
        if not os.path.lexists(ignore):
            with contextlib.suppress(OSError, HitlError), RepoDir(self.repo) as rd:
                rd.replace(rd.spot(ignore), None, fmt.GITIGNORE)

    # -- reading ---------------------------------------------------------------------------

    def read(self, ask_id: str) -> tuple[fmt.Ask, bytes] | None:
        """The ask and its bytes; None when there is no such file (or it is not one)."""
        if self._linked():
            return None
        data = _read(self.path_of(ask_id))
        if data is None:
            return None
        try:
            return fmt.parse(data), data
        except fmt.AskFormatError:
            return None

    def _read_all(self) -> list[tuple[fmt.Ask, bytes]]:
        found = []
        if self._linked():
            return []
        try:
            names = [e.name for e in os.scandir(self.folder) if e.name.endswith(".json")]
        except OSError:
            return []
        for name in names[: fmt.MAX_OPEN * 20]:
            stem = name[: -len(".json")]
            if fmt.ID_RE.match(stem):
                got = self.read(stem)
                if got is not None:
                    found.append(got)
        return found

    def newest_question(self) -> str | None:
        """The newest question ask of the repository (for `check_answer()` with no id)."""
        asks = [a for a, _ in self._read_all() if a.kind == "question" and a.asked is not None]
        if not asks:
            return None
        return max(asks, key=lambda a: a.asked or datetime.min.replace(tzinfo=UTC)).id

    def _prune(self, asks: list[tuple[fmt.Ask, bytes]], now: datetime) -> None:
        for ask, data in asks:
            when = ask.delivered
            if ask.status == "delivered" and when is not None and now - when > KEEP_DELIVERED:
                with contextlib.suppress(OSError, HitlError), RepoDir(self.repo) as rd:
                    rd.replace(rd.spot(self.path_of(ask.id)), data, None)

    # -- answers ---------------------------------------------------------------------------

    def deliver(self, ask_id: str) -> fmt.Ask | None:
        """The ask once its answer is handed to the agent: an answered ask is marked delivered
        (the operator's app then shows the loop got it). None when there is no such ask."""
        return self._deliver(ask_id)[0]

    def _deliver(self, ask_id: str) -> tuple[fmt.Ask | None, bool]:
        """`deliver`, and whether this call is the one that marked it delivered (of two calls
        at once, one is)."""
        for _ in range(5):
            got = self.read(ask_id)
            if got is None:
                return None, False
            ask, data = got
            if ask.status != "answered":
                return ask, False
            try:
                new = fmt.delivered_bytes(data, datetime.now(UTC))
            except fmt.AskFormatError:
                return ask, False  # answered, but not as hitl writes it: left as it is
            try:
                with RepoDir(self.repo) as rd:
                    rd.replace(rd.spot(self.path_of(ask_id)), data, new)
            except ConcurrentWrite:
                continue  # changed meanwhile (an undo, another agent): read it again
            except (OSError, HitlError):
                return ask, False
            return fmt.parse(new), True
        got = self.read(ask_id)
        return (None if got is None else got[0]), False

    def settle(self, ask_id: str) -> Verdict | None:
        """The verdict of a permission ask's answer for one call, marking it delivered; None
        when it is not answered, or when it is an Allow once that another call (an identical
        request at the same moment) took first: Allow once allows one call. A Deny or an Allow
        always holds for every call that waited on it."""
        ask, mine = self._deliver(ask_id)
        if ask is None or ask.status == "open" or ask.answer is None:
            return None
        verdict = self.verdict(ask)
        once = verdict.allow and ask.answer.get("always") is not True
        if once and not mine and ask.status == "delivered":
            return None  # another call took it
        return verdict

    def result(self, ask: fmt.Ask | None, given: str) -> dict[str, Any]:
        """`check_answer`'s JSON for `ask` (None: unknown)."""
        if ask is None:
            return {"status": "unknown", "id": given, "choice": None, "answer": None}
        public = self.public_id(ask.id)
        if ask.status == "open" or ask.answer is None:
            waiting: dict[str, Any] = {
                "status": "waiting",
                "id": public,
                "choice": None,
                "answer": None,
            }
            if ask.notes:  # the operator's notes while the ask stays open (`hitl note`)
                waiting["notes"] = [
                    {k: n.get(k) for k in ("note", "by", "at") if isinstance(n.get(k), str)}
                    for n in ask.notes
                ]
            return waiting
        choice = ask.answer.get("choice")
        text = ask.answer.get("answer")
        return {
            "status": "answered",
            "id": public,
            "choice": choice if isinstance(choice, str) else None,
            "answer": text if isinstance(text, str) else "",
        }

    def check(self, given: str = "") -> dict[str, Any]:
        """Where an ask stands (the newest question when `given` is empty); an answer found is
        handed over (marked delivered)."""
        ask_id = ask_id_of(given) if given.strip() else self.newest_question()
        if ask_id is None:
            return self.result(None, "")
        return self.result(self.deliver(ask_id), given or ask_id)

    async def wait(
        self,
        ask_id: str,
        seconds: float,
        sleep: Callable[[float], Awaitable[None]],
        tick: Callable[[float], Awaitable[None]] | None = None,
    ) -> fmt.Ask | None:
        """Wait up to `seconds` for the ask to be answered; the ask as last read (None: it is
        gone). `tick(elapsed)` is awaited every TICK seconds while waiting."""
        path = self.path_of(ask_id)
        start = time.monotonic()
        next_tick = TICK
        seen: tuple[int, int, int] | None = None
        ask: fmt.Ask | None = None
        while True:
            try:
                st = os.stat(path, follow_symlinks=False)
                now = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                return None
            if now != seen:
                seen = now
                got = self.read(ask_id)
                if got is None:
                    return None
                ask = got[0]
                if ask.status != "open":
                    return ask
            elapsed = time.monotonic() - start
            if elapsed >= seconds:
                return ask
            if tick is not None and elapsed >= next_tick:
                next_tick += TICK
                await tick(elapsed)
            await sleep(min(POLL, max(seconds - elapsed, 0.0)))

    # -- permission prompts --------------------------------------------------------------

    def approve_at_once(
        self, tool: object, tool_input: object, tool_use_id: object = ""
    ) -> tuple[Verdict | None, str]:
        """What can be decided without waiting: an answer for this exact request not yet handed
        over (used once), a grant (allow), else None and the id of the ask to wait on (an open
        one for this request, or a new one filed now)."""
        name, data, use_id = self._checked_request(tool, tool_input, tool_use_id)
        sha = fmt.input_sha(data)
        granted = grantfile.find(self.repo, name, sha) is not None
        open_one: str | None = None
        for ask, _ in sorted(self._read_all(), key=lambda a: a[0].asked or _EPOCH):
            if ask.kind != "permission" or ask.tool != name or fmt.input_sha(ask.input) != sha:
                continue
            if granted:
                # The Allow always answers that made the grant are handed over by it: none is
                # left to allow one more call once the grant is revoked.
                if ask.status == "answered" and (ask.answer or {}).get("always") is True:
                    self._deliver(ask.id)
                continue
            if ask.status == "answered":
                delivered, mine = self._deliver(ask.id)
                if mine and delivered is not None:
                    return self.verdict(delivered), ask.id
            elif ask.status == "open" and open_one is None:
                open_one = ask.id
        if granted:
            return Verdict(True), ""
        if open_one is not None:
            return None, open_one
        return None, self.ask_permission(name, data, use_id).id

    def verdict(self, ask: fmt.Ask) -> Verdict:
        answer = ask.answer or {}
        text = answer.get("answer")
        message = text if isinstance(text, str) and text else "The operator denied this."
        if answer.get("verdict") == "allow":
            return Verdict(True, ask=ask.id)
        return Verdict(False, f"{message} (hitl: {self.public_id(ask.id)})", ask=ask.id)

    def unanswered(self, ask_id: str) -> Verdict:
        """The deny that ends a permission call the operator has not answered in time."""
        return Verdict(
            False,
            f"Not allowed yet: the operator has not answered (hitl ask "
            f"{self.public_id(ask_id)}). Do not retry now: end your turn. The request stays in "
            "the operator's inbox; the same request on your next run gets the answer.",
            ask=ask_id,
        )


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _mkdir_at(folder: int, name: str) -> bool:
    """Make the folder `name` in `folder`; True when it was made now."""
    try:
        os.mkdir(name, 0o755, dir_fd=folder)
    except FileExistsError:
        return False
    except OSError as exc:
        raise AskError(f"cannot make {name}: {exc.strerror}") from None
    return True


def _read(path: Path) -> bytes | None:
    if os.path.islink(path):
        return None
    data = _read_small(path)
    if data is None or len(data) > fmt.MAX_FILE:
        return None
    return data


def _read_small(path: Path) -> bytes | None:
    from hitl_tui import fsio

    return fsio.read_small(path, fmt.MAX_FILE)
