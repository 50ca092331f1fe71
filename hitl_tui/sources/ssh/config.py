"""The `[[remote]]` table of the config: one `Host` per table, checked (`parse_config`).

```toml
[[remote]]
host = "build-1"              # an ssh destination, as the operator's ssh config knows it
paths = ["~/loops"]           # repositories, or folders of them, on that machine
hitl = "~/.local/bin/hitl"    # optional: the command there (default: hitl)
ssh = ["ssh", "-F", "~/.ssh/hitl_config"]   # optional: the ssh command here (default: ssh)
list_timeout_seconds = 5      # optional: how long `hitl list` and `hitl status` wait for it
```
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

from hitl_tui.model import UsageError

#: What `host` may be: an ssh destination (`build-1`, `ada@10.0.0.7`, `[::1]`), never an option.
HOST = re.compile(r"[A-Za-z0-9_.@\[\]:%+-]{1,255}")
#: Seconds `hitl list` and `hitl status` wait for one host (all hosts are asked at once), as
#: they wait 5 s for GitHub: a host that accepts the connection and never answers holds
#: neither a status bar's `hitl status` nor the local blocks. `list_timeout_seconds` in
#: `[[remote]]`.
LIST_TIMEOUT = 5.0


@dataclass(frozen=True)
class Host:
    """One `[[remote]]` table."""

    host: str
    paths: tuple[str, ...]
    hitl: tuple[str, ...] = ("hitl",)
    ssh: tuple[str, ...] = ("ssh",)
    list_timeout: float = LIST_TIMEOUT


def parse_config(tables: list[Any]) -> list[Host]:
    """The `[[remote]]` tables, checked; UsageError naming the table and key."""
    hosts: list[Host] = []
    for index, table in enumerate(tables, 1):
        where = f"[[remote]] #{index}"
        if not isinstance(table, dict):
            raise UsageError(f"{where} must be a table")
        unknown = sorted(set(table) - {"host", "paths", "hitl", "ssh", "list_timeout_seconds"})
        if unknown:
            raise UsageError(
                f"{where}: unknown key {unknown[0]!r} "
                "(known: host, hitl, list_timeout_seconds, paths, ssh)"
            )
        host = table.get("host")
        if not isinstance(host, str) or not HOST.fullmatch(host) or host.startswith("-"):
            raise UsageError(f"{where}: 'host' must be an ssh destination such as \"build-1\"")
        paths = table.get("paths")
        if isinstance(paths, str):
            paths = [paths]
        if (
            not isinstance(paths, list)
            or not paths
            or not all(isinstance(p, str) and p.strip() and "\0" not in p for p in paths)
        ):
            raise UsageError(f"{where} ({host}): 'paths' must be a list of folders on {host}")
        hitl = table.get("hitl", "hitl")
        try:
            words = tuple(shlex.split(hitl)) if isinstance(hitl, str) else ()
        except ValueError:
            words = ()
        if not words:
            raise UsageError(f"{where} ({host}): 'hitl' must be the hitl command on {host}")
        ssh = table.get("ssh", ["ssh"])
        if isinstance(ssh, str):
            ssh = [ssh]
        if not isinstance(ssh, list) or not ssh or not all(isinstance(w, str) and w for w in ssh):
            raise UsageError(f"{where} ({host}): 'ssh' must be a command, as a list of words")
        ssh = [os.path.expanduser(ssh[0]), *(os.path.expanduser(w) for w in ssh[1:])]
        wait = table.get("list_timeout_seconds", LIST_TIMEOUT)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait <= 3600:
            raise UsageError(
                f"{where} ({host}): 'list_timeout_seconds' must be a number of seconds "
                "(more than 0, at most 3600)"
            )
        if any(h.host == host for h in hosts):
            raise UsageError(f"{where}: host {host!r} is named twice")
        hosts.append(Host(host, tuple(paths), words, tuple(ssh), float(wait)))
    return hosts
