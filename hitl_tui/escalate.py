"""The agent's half of the loop: write BLOCKED.md, call a human, and tell the runner to stop.

A stuck agent runs `hitl escalate` instead of hand-writing the file and a curl command (and
getting one of them wrong). The order is fixed by the seed's contract (FORMATS.md §1.5):

1. validate everything, so that invalid input writes nothing and sends nothing (exit 1);
2. write the canonical BLOCKED.md atomically at the repo root, refusing to replace an open block;
   the bytes are checked to read back through hitl's own parser with the same fields;
3. notify through `LOOPKIT_HITL_CHANNEL`; any failure there is one line on stderr, never fatal;
4. exit 2, the code the loop runner treats as "blocked".

Nothing here imports Textual; httpx is imported only when a channel needs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from hitl_tui import fsio
from hitl_tui.model import MAX_PARSE_BYTES, Choice, HitlError
from hitl_tui.repofs import ConcurrentWrite, RepoDir
from hitl_tui.sources.loopkit import BLOCKED, SEPARATORS, parse_blocked
from hitl_tui.textio import one_line, printable

#: Exit code after BLOCKED.md is written, whatever the channel did: the runner's "blocked".
EXIT_BLOCKED = 2

DEFAULT_TIMEOUT = 5.0
TELEGRAM_API = "https://api.telegram.org"
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


#: A message field longer than this is cut: Telegram refuses messages over 4096 characters.
FIELD_LIMIT = 600

# What the loopkit parser reads as a heading, and as a code fence.
_HEADING = re.compile(r"^\s{0,3}#{1,4}\s*\S")
_FENCE = ("```", "~~~")
_LABEL = re.compile(r"^\(?[A-Za-z]\)\s+")


class EscalationError(HitlError):
    """Invalid escalation content, or an open block in the way: nothing written, nothing sent."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class Escalation:
    """The four fields of a canonical BLOCKED.md, validated and normalised."""

    question: str
    context: str
    attempted: tuple[str, ...]
    choices: tuple[Choice, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What `escalate` did: the file it wrote, and how the notification went."""

    path: Path
    channel: str
    #: One line saying why the human was not notified; None when notified (or channel none).
    failure: str | None
    message: str


# -- building and validating ------------------------------------------------------------------


def split_choice(text: str) -> tuple[str, str | None]:
    """`"option — consequence"` as (option, consequence), split as the parser will read it."""
    text = one_line(text)
    text = _LABEL.sub("", text, count=1)
    for sep in SEPARATORS:
        option, found, consequence = text.partition(sep)
        if found and option.strip() and consequence.strip():
            return option.strip(), consequence.strip()
    return text.strip(), None


def from_args(
    question: str | None,
    context: str | None,
    attempted: list[str] | None,
    choices: list[str] | None,
) -> Escalation:
    """An Escalation from command-line values; raises EscalationError when they are invalid."""
    question = (question or "").strip()
    if len(question.splitlines()) > 1:
        raise EscalationError("--question must be one line (put details in --context)")
    parsed = [split_choice(c) for c in choices or []]
    return _build(
        question,
        context or "",
        attempted or [],
        parsed,
        names=("--question", "--context", "--attempted", "--choice"),
    )


def from_draft(text: str) -> tuple[Escalation, list[str]]:
    """An Escalation from a markdown draft, parsed the way hitl reads BLOCKED.md.

    Returns the escalation and the titles of sections the draft had beyond the four (they are
    not part of the canonical file, so they are left out).
    """
    fields, _problems = parse_blocked(text)
    question = fields["question"].strip()
    if question in ("(no question given)", "(BLOCKED.md is empty)"):
        question = ""
    if not fields["context"] and not fields["choices"] and not fields["attempted"]:
        raise EscalationError(
            "the draft has no '## Context:', '## Attempted:' or '## Choices:' section "
            "(see 'hitl escalate --help')"
        )
    paragraphs = [p for p in re.split(r"\n\s*\n", question) if p.strip()]
    if len(paragraphs) > 1:
        raise EscalationError("the draft's question must be one line (put details in Context)")
    # A question soft-wrapped over several lines is one markdown paragraph: join its lines.
    question = " ".join(line.strip() for line in question.splitlines())
    choices = [(c.option, c.consequence) for c in fields["choices"]]
    escalation = _build(
        question,
        fields["context"],
        list(fields["attempted"]),
        choices,
        names=("the Question section", "the Context section", "the Attempted section", "Choices"),
    )
    return escalation, [s.title for s in fields["extra"]]


def _build(
    question: str,
    context: str,
    attempted: list[str],
    choices: list[tuple[str, str | None]],
    names: tuple[str, str, str, str],
) -> Escalation:
    q_name, c_name, a_name, ch_name = names
    if not question:
        raise EscalationError(f"{q_name} is missing or empty")
    context = context.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not context:
        raise EscalationError(f"{c_name} is missing or empty")
    items = tuple(one_line(a) for a in attempted if one_line(a))
    if not items:
        raise EscalationError(f"{a_name} is missing or empty: say what you tried")
    if len(choices) < 2:
        raise EscalationError(
            f"at least two choices are needed ({ch_name}: 'option — consequence'), "
            f"got {len(choices)}"
        )
    if len(choices) > len(LABELS):
        raise EscalationError(f"at most {len(LABELS)} choices, got {len(choices)}")
    made: list[Choice] = []
    for i, (option, consequence) in enumerate(choices):
        option = one_line(option)
        consequence = one_line(consequence) if consequence else None
        if not option:
            raise EscalationError(f"choice {i + 1} is empty")
        made.append(Choice(LABELS[i], option, consequence or None))
    escalation = Escalation(question, context, items, tuple(made))
    for name, value in ((q_name, question), (c_name, context)):
        trouble = _markdown_trouble(value)
        if trouble:
            raise EscalationError(f"{name}: {trouble}; reword it")
    for name, value in _all_text(escalation):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise EscalationError(f"{name} is not valid UTF-8 text") from None
    _check_reads_back(escalation, render(escalation))
    return escalation


def _all_text(esc: Escalation) -> list[tuple[str, str]]:
    out = [("the question", esc.question), ("the context", esc.context)]
    out += [("an attempted item", a) for a in esc.attempted]
    for c in esc.choices:
        out.append((f"choice {c.key}", c.option))
        if c.consequence:
            out.append((f"choice {c.key}", c.consequence))
    return out


def _markdown_trouble(text: str) -> str | None:
    """Why `text` would not read back as itself inside a BLOCKED.md section, if it would not."""
    fence = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith(_FENCE):
            fence = not fence
            continue
        if not fence and _HEADING.match(line):
            return f"line {number} starts with '#', which reads as a markdown heading"
    if fence:
        return "it opens a code fence (``` or ~~~) that it does not close"
    return None


def _check_reads_back(esc: Escalation, data: bytes) -> None:
    """Refuse a file that hitl's own parser would read differently from what was asked."""
    fields, _ = parse_blocked(data.decode("utf-8"))
    if fields["question"] != esc.question:
        raise EscalationError("the question would not read back as written; reword it")
    if fields["context"] != esc.context:
        raise EscalationError("the context would not read back as written; reword it")
    if tuple(fields["attempted"]) != esc.attempted:
        raise EscalationError("an attempted item would not read back as written; reword it")
    got = tuple(fields["choices"])
    for i, want in enumerate(esc.choices):
        if i >= len(got) or got[i] != want:
            shown = printable(got[i].label()) if i < len(got) else "nothing"
            raise EscalationError(
                f"choice {want.key} would read back as {shown!r}; reword it "
                "(leading or trailing * and _ are taken as markdown emphasis)"
            )
    if len(got) != len(esc.choices):
        raise EscalationError("the choices would not read back as written; reword them")


# -- rendering --------------------------------------------------------------------------------


def render(esc: Escalation) -> bytes:
    """The canonical BLOCKED.md (FORMATS.md §1.1): four sections, choices `- A) option — ...`."""
    lines = ["# Blocked", "", "## Question:", esc.question, "", "## Context:", esc.context, ""]
    lines.append("## Attempted:")
    lines += [f"- {item}" for item in esc.attempted]
    lines += ["", "## Choices:"]
    lines += [f"- {c.label()}" for c in esc.choices]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _field(text: str) -> str:
    text = one_line(text)
    return text if len(text) <= FIELD_LIMIT else text[: FIELD_LIMIT - 1] + "…"


def message(esc: Escalation, repo_name: str, when: datetime) -> str:
    """The five-line notification of FORMATS.md §1.5, each field collapsed to one line."""
    stamp = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "\n".join(
        [
            # printable: a folder name's undecodable bytes as `\xe9` (no channel takes them raw)
            f"[loopkit] blocked in {printable(one_line(repo_name))} on {stamp}",
            f"Q: {_field(esc.question)}",
            f"Context: {_field(esc.context)}",
            f"Attempted: {_field('; '.join(esc.attempted))}",
            f"Choices: {_field(' | '.join(c.option for c in esc.choices))}",
        ]
    )


# -- writing ----------------------------------------------------------------------------------


def find_repo(start: Path) -> Path:
    """The git top level above `start` (a `.git` folder or file), else `start` itself."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return start


def write_blocked(repo: Path, esc: Escalation, replace: bool = False) -> Path:
    """Write BLOCKED.md atomically at `repo`'s root; an open block is kept unless `replace`."""
    from hitl_tui.locks import repo_lock

    if not repo.is_dir():
        raise EscalationError(f"not a folder: {printable(str(repo))}")
    path = repo / BLOCKED
    data = render(esc)
    with contextlib.ExitStack() as stack:
        try:
            # Serialises with an operator answering this repo; `hitl answer` re-checks anyway.
            stack.enter_context(repo_lock(repo))
        except OSError:
            pass  # no writable state folder (a sandboxed agent): the write is still atomic
        if os.path.lexists(path) and not replace:
            raise EscalationError(
                f"{BLOCKED} already exists in {printable(repo.name)}: the loop is already "
                "blocked (use --replace to overwrite it)"
            )
        if os.path.isdir(path):
            raise EscalationError(f"{BLOCKED} in {printable(repo.name)} is a folder")
        try:
            if replace:
                fsio.atomic_write(fsio.resolve_for_write(repo, path), data)
            else:
                # Created with RENAME_NOREPLACE: a BLOCKED.md that appears meanwhile is kept.
                with RepoDir(repo) as rd:
                    rd.replace(rd.spot(path), None, data)
        except ConcurrentWrite:
            raise EscalationError(
                f"{BLOCKED} already exists in {printable(repo.name)}: the loop is already "
                "blocked (use --replace to overwrite it)"
            ) from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise EscalationError(f"could not write {BLOCKED}: {reason}") from None
    return path


# -- notifying --------------------------------------------------------------------------------


class _NotifyFailed(Exception):
    """A soft failure: the reason, already free of secrets."""


def notify_timeout(env: Mapping[str, str]) -> float:
    """Seconds to wait for a channel: `$LOOPKIT_HITL_TIMEOUT`, default 5."""
    try:
        value = float(env.get("LOOPKIT_HITL_TIMEOUT", "") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value <= 300 else DEFAULT_TIMEOUT


def channel_of(env: Mapping[str, str]) -> str:
    return (env.get("LOOPKIT_HITL_CHANNEL") or "none").strip().lower() or "none"


def notify(text: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """Send `text` through the configured channel: (channel, None) or (channel, why it failed).

    Never raises for a channel problem, and the reason never contains a token or webhook URL.
    """
    channel = channel_of(env)
    senders: dict[str, Callable[[str, Mapping[str, str], float], None]] = {
        "telegram": _telegram,
        "slack": _slack,
        "dial": _dial,
    }
    if channel == "none":
        return channel, None
    sender = senders.get(channel)
    if sender is None:
        shown = printable(one_line(channel))[:40]
        return channel, (
            f"unknown LOOPKIT_HITL_CHANNEL {shown!r} (use telegram, slack, dial or none)"
        )
    secrets = [
        env.get(name, "")
        for name in (
            "LOOPKIT_HITL_TELEGRAM_TOKEN",
            "LOOPKIT_HITL_TELEGRAM_API",
            "LOOPKIT_HITL_SLACK_WEBHOOK",
            "LOOPKIT_HITL_DIAL_CMD",
        )
    ]
    try:
        sender(text, env, notify_timeout(env))
    except _NotifyFailed as exc:
        return channel, scrub(str(exc), secrets)
    except Exception as exc:  # a soft failure by contract; its text might quote a secret
        return channel, f"unexpected {type(exc).__name__}"
    return channel, None


def _need(env: Mapping[str, str], name: str) -> str:
    value = (env.get(name) or "").strip()
    if not value:
        raise _NotifyFailed(f"{name} is not set")
    return value


def _telegram(text: str, env: Mapping[str, str], timeout: float) -> None:
    token = _need(env, "LOOPKIT_HITL_TELEGRAM_TOKEN")
    chat = _need(env, "LOOPKIT_HITL_TELEGRAM_CHAT")
    api = (env.get("LOOPKIT_HITL_TELEGRAM_API") or TELEGRAM_API).strip().rstrip("/")
    url = f"{api}/bot{quote(token, safe=':')}/sendMessage"
    where = "LOOPKIT_HITL_TELEGRAM_API and LOOPKIT_HITL_TELEGRAM_TOKEN"
    _post(url, where, timeout, data={"chat_id": chat, "text": text})


def _slack(text: str, env: Mapping[str, str], timeout: float) -> None:
    webhook = _need(env, "LOOPKIT_HITL_SLACK_WEBHOOK")
    body = {"text": slack_literal(text), "mrkdwn": False}
    _post(webhook, "LOOPKIT_HITL_SLACK_WEBHOOK", timeout, json=body)


def slack_literal(text: str) -> str:
    """The agent's text as Slack shows it literally: `<!channel>` would notify everyone and
    `<https://x|label>` would disguise a link, so &, < and > are escaped (Slack's own rule);
    `mrkdwn: false` beside it keeps *stars* and _underscores_ as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _post(url: str, where: str, timeout: float, **body: object) -> None:
    """POST, turning every problem into a reason that never quotes the URL (it holds secrets)."""
    import httpx

    try:
        status, reason = _send(url, timeout, **body)
    except (TimeoutError, httpx.TimeoutException):
        raise _NotifyFailed(f"no answer within {timeout:g} s") from None
    except httpx.ConnectError as exc:
        # The operating system's reason ("Connection refused"), scrubbed again by notify().
        raise _NotifyFailed(f"could not connect ({exc})") from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError):
        # Messages about a malformed URL quote parts of it, such as the port: say only where.
        raise _NotifyFailed(f"not a valid http(s) URL in {where}") from None
    except httpx.HTTPError as exc:
        raise _NotifyFailed(type(exc).__name__) from None
    if not 200 <= status < 300:
        raise _NotifyFailed(f"HTTP {status} {one_line(reason)[:200]}".strip())


def _send(url: str, timeout: float, **body: object) -> tuple[int, str]:
    """POST within `timeout` seconds in all (connect, request, status line and headers):
    (status, reason phrase). The response body is never read: the status is the answer, and a
    body that never ends must not hold the agent."""
    import httpx

    from hitl_tui import net

    async def post() -> tuple[int, str]:
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", url, **body) as response,  # type: ignore[arg-type]
        ):
            return response.status_code, response.reason_phrase

    return net.run_bounded(post, timeout)


def _dial(text: str, env: Mapping[str, str], timeout: float) -> None:
    command = _need(env, "LOOPKIT_HITL_DIAL_CMD")
    # Its own session, so that a timeout kills the whole pipeline, not just the shell.
    proc = subprocess.Popen(
        command,
        shell=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.communicate((text + "\n").encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise _NotifyFailed(f"LOOPKIT_HITL_DIAL_CMD did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise _NotifyFailed(f"LOOPKIT_HITL_DIAL_CMD exited with status {proc.returncode}")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret, and every part of one that could be secret, replaced by `***`.

    A server may echo a webhook URL or a token back in pieces (a reason phrase quoting the
    path, split at its slashes), so besides each secret whole (and URL-encoded, in either hex
    case) this masks each path segment and query value of a URL that could be a key, the
    user and password of one, and either side of a `bot-id:secret` token.
    """
    forms: set[str] = set()
    for secret in secrets:
        forms |= _secret_forms(secret.strip())
    for form in sorted(forms, key=len, reverse=True):
        text = _mask(text, form)
    text = printable(one_line(text))
    for form in sorted(forms, key=len, reverse=True):  # once more, on the one-line form
        text = _mask(text, form)
    return text


def _secret_forms(secret: str) -> set[str]:
    if not secret:
        return set()
    parts: set[str] = {secret}
    try:
        url = urlsplit(secret)
    except ValueError:
        url = None
    if url is not None and url.scheme and url.netloc:
        rest = url.path + (f"?{url.query}" if url.query else "")
        if len(rest) > 1:
            parts.add(rest)
        parts.update(p for p in (url.username, url.password) if p)
        parts.update(seg for seg in url.path.split("/") if _could_be_key(unquote(seg)))
        for _name, value in parse_qsl(url.query, keep_blank_values=False):
            parts.add(value)
        parts.update(seg for seg in url.query.split("&") if "=" not in seg and seg)
    elif ":" in secret:
        parts.update(half for half in secret.split(":") if len(half) >= 3)
    forms: set[str] = set()
    for part in parts:
        for form in (part, unquote(part), quote(part, safe=""), quote(part, safe="/:")):
            forms.add(form)
            forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form))
    return {f for f in forms if len(f) >= 3}


def _could_be_key(segment: str) -> bool:
    """A path segment that might be a key: not a plain lowercase word like `services`."""
    if len(segment) < 3:
        return False
    return len(segment) >= 16 or any(c.isdigit() or c.isupper() for c in segment)


def _mask(text: str, form: str) -> str:
    if len(form) >= 8:
        return text.replace(form, "***")
    # A short part (`T000`) only where it stands alone, so that it cannot mangle other words.
    pattern = rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])"
    return re.sub(pattern, "***", text)


# -- the whole escalation ---------------------------------------------------------------------


def escalate(
    esc: Escalation,
    repo: Path,
    env: Mapping[str, str] | None = None,
    replace: bool = False,
    when: datetime | None = None,
) -> Outcome:
    """Write BLOCKED.md, then notify. Raises EscalationError (nothing written, nothing sent)."""
    env = os.environ if env is None else env
    repo = Path(os.path.abspath(repo))
    path = write_blocked(repo, esc, replace=replace)
    text = message(esc, repo.name, when or datetime.now(UTC))
    channel, failure = notify(text, env)
    return Outcome(path, channel, failure, text)


def read_draft(name: str, stdin: object = None) -> str:
    """The draft's text from a file, or from standard input for `-`; at most 1 MB."""
    import sys

    try:
        if name == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            data = stream.read(MAX_PARSE_BYTES + 1)  # type: ignore[attr-defined]
        else:
            with open(name, "rb") as f:
                data = f.read(MAX_PARSE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EscalationError(f"cannot read the draft {printable(name)}: {reason}") from None
    if len(data) > MAX_PARSE_BYTES:
        raise EscalationError("the draft is larger than 1 MB")
    return data.decode("utf-8", "replace")
