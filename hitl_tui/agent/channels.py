"""Calling a human: the notification channels of `hitl escalate` (`LOOPKIT_HITL_CHANNEL`).

Telegram, Slack, a dial command, or none. A channel problem is never fatal and never raises:
`notify` returns why it failed, in one line that never quotes a token or webhook URL (`scrub`).
httpx is imported only when a channel needs it. The Slack-style POST (`post_slack`) and the
command fed on its standard input (`run_with_stdin`) are shared with the operator's notices
(`notices.py`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from hitl_tui.textio import one_line, printable

DEFAULT_TIMEOUT = 5.0
#: The commands `run_with_stdin` is running now (`kill_running` ends them).
RUNNING: set[subprocess.Popen[bytes]] = set()
TELEGRAM_API = "https://api.telegram.org"


class ChannelFailed(Exception):
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
    except ChannelFailed as exc:
        return channel, scrub(str(exc), secrets)
    except Exception as exc:  # a soft failure by contract; its text might quote a secret
        return channel, f"unexpected {type(exc).__name__}"
    return channel, None


def _need(env: Mapping[str, str], name: str) -> str:
    value = (env.get(name) or "").strip()
    if not value:
        raise ChannelFailed(f"{name} is not set")
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
    post_slack(webhook, text, timeout, "LOOPKIT_HITL_SLACK_WEBHOOK")


def post_slack(webhook: str, text: str, timeout: float, where: str) -> None:
    """POST `text` to a Slack-style incoming webhook as `{"text": ..., "mrkdwn": false}`,
    shown literally; raises ChannelFailed with a reason that names `where`, never the URL.
    Shared by escalate's slack channel and the operator's `[notify] webhook`."""
    body = {"text": slack_literal(text), "mrkdwn": False}
    _post(webhook, where, timeout, json=body)


def slack_literal(text: str) -> str:
    """The agent's text as Slack shows it literally: `<!channel>` would notify everyone and
    `<https://x|label>` would disguise a link, so &, < and > are escaped (Slack's own rule);
    `mrkdwn: false` beside it keeps *stars* and _underscores_ as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _post(url: str, where: str, timeout: float, **body: object) -> None:
    """POST, turning every problem into a reason that never quotes the URL (it holds secrets)."""
    import httpx

    try:
        status, reason = send(url, timeout, **body)
    except (TimeoutError, httpx.TimeoutException):
        raise ChannelFailed(f"no answer within {timeout:g} s") from None
    except httpx.ConnectError as exc:
        # The operating system's reason ("Connection refused"), scrubbed again by notify().
        raise ChannelFailed(f"could not connect ({exc})") from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError):
        # Messages about a malformed URL quote parts of it, such as the port: say only where.
        raise ChannelFailed(f"not a valid http(s) URL in {where}") from None
    except httpx.HTTPError as exc:
        raise ChannelFailed(type(exc).__name__) from None
    if not 200 <= status < 300:
        raise ChannelFailed(f"HTTP {status} {one_line(reason)[:200]}".strip())


def send(url: str, timeout: float, **body: object) -> tuple[int, str]:
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
    run_with_stdin(command, text, timeout, "LOOPKIT_HITL_DIAL_CMD")


def run_with_stdin(command: str | Sequence[str], text: str, timeout: float, what: str) -> None:
    """Run `command` (a shell line, or an argument list run without a shell) with `text` and
    a newline on its standard input, its output discarded, killed with all it started after
    `timeout` s. Raises ChannelFailed naming `what`, never the command's arguments. Shared by
    escalate's dial channel and the operator's `[notify] command`."""
    shell = isinstance(command, str)
    try:
        # Its own session, so that a timeout kills the whole pipeline, not just the shell.
        proc = subprocess.Popen(
            command if shell else list(command),
            shell=shell,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise ChannelFailed(
            f"{what} could not start: {exc.strerror or type(exc).__name__}"
        ) from None
    RUNNING.add(proc)
    try:
        proc.communicate((text + "\n").encode("utf-8", "replace"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ChannelFailed(f"{what} did not finish within {timeout:g} s") from None
    finally:
        RUNNING.discard(proc)
    if proc.returncode != 0:
        raise ChannelFailed(f"{what} exited with status {proc.returncode}")


def kill_running() -> None:
    """Kill every command `run_with_stdin` is still running, with all it started (a process
    that exits does not leave one behind for its timeout to end)."""
    for proc in list(RUNNING):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
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
