"""`[telegram]`: the bot's config, validated at load; the token read from the environment only.

```toml
[telegram]
token_env = "HITL_TELEGRAM_TOKEN"   # the bot token comes from the environment only
chat_id = 123456789                 # the only chat that may answer
allowed_user_ids = [42]             # optional, in a group: who may answer (else anyone)
api = "https://api.telegram.org"    # or a self-hosted Bot API server
```

The token is never printed: `scrub` masks it (whole, URL-encoded, either half of
`bot-id:secret`) and the `api` URL's parts that could be secret, in every error and log line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hitl_tui.agent import channels
from hitl_tui.model import UsageError
from hitl_tui.textio import one_line, printable

KEYS = ("token_env", "chat_id", "allowed_user_ids", "api")
DEFAULT_TOKEN_ENV = "HITL_TELEGRAM_TOKEN"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: A Bot API token as BotFather gives it: the bot's id, a colon, the secret.
_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,100}\Z")
#: Telegram's ids fit in 52 bits; anything larger is a typo.
_MAX_ID = 1 << 52


@dataclass(frozen=True)
class TelegramConfig:
    """`[telegram]`, validated (`from_config`). The api URL may hold a secret (a self-hosted
    server's key): never in a repr."""

    chat_id: int
    token_env: str = DEFAULT_TOKEN_ENV
    allowed_user_ids: frozenset[int] = frozenset()
    api: str = field(default=channels.TELEGRAM_API, repr=False)

    def token(self, env: Mapping[str, str]) -> str:
        """The bot token from `$token_env`; a UsageError (never quoting it) when it is
        missing or not shaped like one."""
        value = (env.get(self.token_env) or "").strip()
        if not value:
            raise UsageError(f"${self.token_env} ([telegram] token_env) is not set")
        if not _TOKEN.match(value):
            raise UsageError(
                f"${self.token_env} ([telegram] token_env) is not a bot token "
                "(digits, a colon, then the secret, as BotFather gives it)"
            )
        return value

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        """What `scrub` masks: the token and the api URL."""
        return [(env.get(self.token_env) or "").strip(), self.api]

    def scrub(self, text: str, env: Mapping[str, str]) -> str:
        """`text` in one line, with the token and the api URL's secret parts masked."""
        return scrub(text, self.secrets(env))

    def allows(self, chat_id: object, user_id: object) -> bool:
        """Whether an update from this chat and user may answer."""
        if isinstance(chat_id, bool) or chat_id != self.chat_id or isinstance(user_id, bool):
            return False
        if self.allowed_user_ids:
            return user_id in self.allowed_user_ids
        # A private chat's id is its user's: only that user answers there. In a group, any
        # member does, unless allowed_user_ids names who may.
        return self.chat_id < 0 or user_id == self.chat_id


def scrub(text: str, secrets: list[str]) -> str:
    """`channels.scrub`, plus any `bot<digits>:<secret>` left in a URL (a server that quotes
    another token back)."""
    text = channels.scrub(text, secrets)
    return re.sub(r"bot[0-9]{1,20}:[A-Za-z0-9_-]+", "bot***", text)


def _an_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX_ID < value < _MAX_ID


def from_config(path: Path, table: object) -> TelegramConfig:
    """`[telegram]` as a TelegramConfig; a one-line UsageError naming the file and the key."""

    def fail(text: str) -> UsageError:
        return UsageError(f"{path}: [telegram]: {text}")

    if not isinstance(table, dict):
        raise UsageError(f"{path}: 'telegram' must be a [telegram] table (chat_id = ..., ...)")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        shown = printable(one_line(unknown[0]))[:40]
        hint = " (the token comes from the environment: token_env)" if "token" in unknown else ""
        raise fail(f"unknown key {shown!r} (known: {', '.join(KEYS)}){hint}")
    token_env = table.get("token_env", DEFAULT_TOKEN_ENV)
    if not isinstance(token_env, str) or not _ENV_NAME.match(token_env):
        raise fail(
            'token_env must be the name of an environment variable, like "HITL_TELEGRAM_TOKEN"'
        )
    if "chat_id" not in table:
        raise fail("chat_id is missing: the id of the only chat that may answer")
    chat_id = table["chat_id"]
    if not _an_id(chat_id):
        raise fail("chat_id must be a number (a group's is negative), not in quotes")
    users = table.get("allowed_user_ids", [])
    if not isinstance(users, list) or not all(_an_id(u) and u > 0 for u in users):
        raise fail("allowed_user_ids must be a list of user ids (numbers)")
    api = table.get("api", channels.TELEGRAM_API)
    if not isinstance(api, str) or not re.match(r"https?://[^\s/?#]+(/[^\s?#]*)?\Z", api.strip()):
        raise fail(
            'api must be the http(s) URL of a Bot API server, like "https://api.telegram.org"'
        )
    return TelegramConfig(
        chat_id=chat_id,
        token_env=token_env,
        allowed_user_ids=frozenset(users),
        api=api.strip().rstrip("/"),
    )
