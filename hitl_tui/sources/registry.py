"""Every backend hitl knows, in one table: the only place that names them.

A new file format is its package in `sources/` plus one line in LOCAL; a new remote backend is
its module plus one line in REMOTE (its config table's name, and a function importing its
class: a remote backend may need libraries, httpx for GitHub, that a command without that
table never loads). Nothing else (the CLI, the app, answering, the journal, the config) names
a backend: they ask `Source` what it can do.
"""

from __future__ import annotations

from collections.abc import Callable

from hitl_tui.model import UsageError
from hitl_tui.sources.agenticloop.source import AgenticloopSource
from hitl_tui.sources.asks.source import AskSource
from hitl_tui.sources.base import Source
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.sources.remote import Journaling, RemoteJournal


def _github() -> type[Source]:
    from hitl_tui.sources.github.backend import GithubBackend

    return GithubBackend


def _ssh() -> type[Source]:
    from hitl_tui.sources.ssh.backend import SshBackend

    return SshBackend


#: The local file formats, found in every repository.
LOCAL: tuple[type[Source], ...] = (LoopkitSource, AgenticloopSource, AskSource)

#: The remote backends: config table -> its class (imported when the table is present).
REMOTE: dict[str, Callable[[], type[Source]]] = {
    "github": _github,
    "remote": _ssh,
}


def local_sources() -> list[Source]:
    """A fresh instance of every local source (they cache per-repo layout)."""
    return [cls() for cls in LOCAL]


def default_sources() -> list[Source]:
    """A fresh instance of every local source: what an Inbox reads with unless told."""
    return local_sources()


def remote_sources(
    tables: dict[str, object], journal: RemoteJournal | None = None
) -> tuple[Source, ...]:
    """The remote backends the config's tables ask for, each validated by itself (once).

    `tables` maps a table's name to its raw value (`[[github]]`: a list of tables, or one
    table). Raises UsageError, one line naming the table, for a value that is not one.
    A backend that records answers in the journal itself (`Journaling`) is handed `journal`.
    """
    built = []
    for key, value in tables.items():
        if key not in REMOTE:
            raise UsageError(f"unknown table {key!r} (known: {', '.join(sorted(REMOTE))})")
        entries = [value] if isinstance(value, dict) else value
        if not isinstance(entries, list):
            raise UsageError(f"'{key}' must be a [[{key}]] table or an array of them")
        if entries:
            backend = REMOTE[key]().from_config(entries)
            if journal is not None and isinstance(backend, Journaling):
                backend.use_journal(journal)
            built.append(backend)
    return tuple(built)
