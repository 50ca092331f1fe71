"""Grants: "Allow always" answers to a permission ask, kept in the repository as
`.hitl/grants.jsonl`, one JSON object per line.

A grant allows one tool with exactly one input (its `input_sha`) in this repository, with no
more asking. It is made by the operator's answer (the same plan, journal and undo as the
answer itself) and revoked by removing its line (`hitl grants revoke`, or `x` in the app's
grants screen), journaled and undoable the same way. Only those two changes are ever made: a
line added at the end, a line removed; every other byte of the file stays.

Layer: sources (the asks backend package). Pure but for reading the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from hitl_tui import fsio
from hitl_tui.sources.asks.format import ASKS_DIR, HITL_DIR, parse_time

GRANTS = "grants.jsonl"
GRANT_ID_RE = re.compile(r"^grant-[a-z0-9]{4,16}$")
#: A grants file larger than this is not read (no grant applies: the agent is asked).
MAX_GRANTS_FILE = 4 << 20


@dataclass(frozen=True, slots=True)
class Grant:
    """One line of the grants file."""

    id: str
    tool: str
    input_sha: str
    #: What was allowed, in one line, for the operator's list (`Bash: rm -rf build/`).
    summary: str
    granted: str
    by: str
    ask: str
    #: The line's bytes, with its ending (what a revoke removes).
    line: bytes

    def to_json(self, repo: Path | str) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": str(repo),
            "tool": self.tool,
            "input_sha": self.input_sha,
            "summary": self.summary,
            "granted": self.granted,
            "by": self.by,
            "ask": self.ask,
        }


def grants_path(repo: Path) -> Path:
    return repo / HITL_DIR / GRANTS


def asks_dir(repo: Path) -> Path:
    return repo / HITL_DIR / ASKS_DIR


def read_grants(data: bytes | None) -> list[Grant]:
    """Every well-formed grant in the file's bytes; a line that is not one is skipped (it
    grants nothing)."""
    if not data:
        return []
    grants: list[Grant] = []
    for line in data.splitlines(keepends=True):
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        values = {k: item.get(k) for k in ("id", "tool", "input_sha", "summary", "by", "ask")}
        if not all(isinstance(v, str) for v in values.values()):
            continue
        if not GRANT_ID_RE.match(str(values["id"])) or parse_time(item.get("granted")) is None:
            continue
        grants.append(
            Grant(
                id=str(values["id"]),
                tool=str(values["tool"]),
                input_sha=str(values["input_sha"]),
                summary=str(values["summary"]),
                granted=str(item["granted"]),
                by=str(values["by"]),
                ask=str(values["ask"]),
                line=line,
            )
        )
    return grants


def read_file(repo: Path) -> bytes | None:
    """The grants file's bytes (None: there is none, or it is no regular file or too large)."""
    if os.path.islink(repo / HITL_DIR) or os.path.islink(grants_path(repo)):
        return None  # never another repository's grants, through a link
    data = fsio.read_small(grants_path(repo), MAX_GRANTS_FILE)
    if data is None or len(data) > MAX_GRANTS_FILE:
        return None
    return data


def find(repo: Path, tool: str, sha: str) -> Grant | None:
    """The grant that allows `tool` with the input `sha` in `repo`, if there is one."""
    for grant in read_grants(read_file(repo)):
        if grant.tool == tool and grant.input_sha == sha:
            return grant
    return None


def with_grant(data: bytes | None, grant: dict[str, Any]) -> bytes:
    """The file's bytes with `grant` as a new last line (in the file's own line ending: its
    first line's, so a file whose last line has no ending keeps CRLF too)."""
    old = data or b""
    first = old.find(b"\n")
    ending = b"\r\n" if first > 0 and old[first - 1 : first] == b"\r" else b"\n"
    if old and not old.endswith(b"\n"):
        old += ending
    return old + orjson.dumps(grant) + ending


def without(data: bytes, grant: Grant) -> bytes:
    """The file's bytes with every line of `grant`'s id removed (a copy of its line would go
    on granting); every other byte kept."""
    return b"".join(
        line
        for line in data.splitlines(keepends=True)
        if not any(g.id == grant.id for g in read_grants(line))
    )
