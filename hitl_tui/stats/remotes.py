"""The remote backends' blocks for the figures, and the hosts that did not answer.

`read_remotes` reads each remote backend of the config into the inbox (every host at once, as
`hitl status` does); a [[remote]] host that did not answer (its warning names it: `build-1:
...`), or a backend that warned as a whole (GitHub), is an `Unknown` of kind "host", since
when it was last reached: `stats/reached.json` in the state folder keeps, for each, the last
time a read of it went through (`{"format": 1, "reached": {"SOURCE HOST": TIME}}`; written
whole, atomically; unreadable, it is started again: it only ever dates an Unknown).

Domain code: no Textual.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.paths import state_dir
from hitl_tui.stats.figures import Unknown
from hitl_tui.textio import printable
from hitl_tui.timefmt import aware_time

FORMAT = 1


def reached_file() -> Path:
    return state_dir() / "stats" / "reached.json"


def _load() -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError, RecursionError):
        data = json.loads(reached_file().read_bytes())
        reached = data.get("reached") if isinstance(data, dict) else None
        if isinstance(reached, dict) and data.get("format") == FORMAT:
            return {k: v for k, v in reached.items() if isinstance(v, str) and aware_time(v)}
    return {}


def _save(reached: dict[str, str]) -> None:
    with contextlib.suppress(OSError):
        reached_file().parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps({"format": FORMAT, "reached": reached}, sort_keys=True).encode()
        fsio.atomic_write(reached_file(), data, 0o600)


def read_remotes(
    inbox: Any,
    remotes: Iterable[Any],
    now: datetime | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Unknown]:
    """Read every remote backend's blocks into `inbox` (`remote.read_into`); an Unknown for
    each host or backend that did not answer. `warn` also gets each warning, as said."""
    now = now or datetime.now(UTC)
    reached = _load()
    unknowns: list[Unknown] = []
    for remote in remotes:
        said: list[str] = []
        remote.read_into(inbox, said.append)
        name = str(remote.name)
        hosts = [str(h) for h in (getattr(remote, "hosts", None) or {})]
        down: dict[str, str] = {}
        whole: list[str] = []
        for text in said:
            if warn is not None:
                warn(text)
            host = next((h for h in hosts if text.startswith(f"{h}:")), None)
            if host is None:
                whole.append(text)
            else:
                down.setdefault(host, text)
        if whole:
            unknowns.append(_unknown(name, "", whole[0], reached))
        else:
            reached[f"{name} "] = now.isoformat()
        for host in hosts:
            if host in down:
                unknowns.append(_unknown(name, host, down[host], reached))
            elif not whole:
                reached[f"{name} {host}"] = now.isoformat()
    _save(reached)
    return unknowns


def _unknown(source: str, host: str, why: str, reached: dict[str, str]) -> Unknown:
    last = aware_time(reached.get(f"{source} {host}"))
    what = f"host {host} ({source})" if host else f"{source}"
    why = why.removesuffix(" (its blocks are not listed)")
    return Unknown("host", printable(what), last, printable(" ".join(why.split())), source, host)
