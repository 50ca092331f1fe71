"""Revoking a grant (an "Allow always" answer to an agent's permission prompt): its line
removed from `.hitl/grants.jsonl` as a plan, written by the same safe writer as an answer and
journaled, so `hitl undo` puts it back. `hitl grants --revoke` and the app's grants screen both
call `revoke`.

Layer: agent, beside escalate and guard (above the answer writer).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hitl_tui import fsio
from hitl_tui.answers.apply import apply_plan
from hitl_tui.model import Answer, Block, Done, FileChange, Plan, StaleError, fingerprint
from hitl_tui.sources.asks import grants as grantfile
from hitl_tui.sources.asks.source import NAME


def listed(repos: list[tuple[Path, str]]) -> list[tuple[Path, str, grantfile.Grant]]:
    """Every grant of `repos` ((folder, id) pairs), in their order."""
    return [
        (repo, label, grant)
        for repo, label in repos
        for grant in grantfile.read_grants(grantfile.read_file(repo))
    ]


def revoke_plan(repo: Path, label: str, grant: grantfile.Grant, operator: str) -> Plan:
    """The plan that removes `grant`'s line; StaleError when the file no longer holds it."""
    path = grantfile.grants_path(repo)
    fsio.resolve_for_write(repo, path)
    old = fsio.read_bytes(path)
    if old is None or grant.line not in old:
        raise StaleError(f"{grant.id}: the grant is gone (revoked already?)")
    new = grantfile.without(old, grant)
    block = Block(
        id=f"{label}/{grant.id}",
        source=NAME,
        repo=repo,
        path=path,
        state="granted",
        question=f"Grant: {grant.summary}",
        context="",
        attempted=(),
        choices=(),
        since=datetime.now(UTC),
        fingerprint=fingerprint(old),
        raw="",
    )
    answer = Answer(texts=(f"revoke {grant.id}",), operator=operator)
    summary = f"{label}: grant {grant.id} revoked ({grant.summary})"
    change = FileChange(path, old, new)
    return Plan(block, answer, (change,), {path: fingerprint(old)}, summary)


def revoke(repo: Path, label: str, grant: grantfile.Grant, operator: str = "operator") -> Done:
    """Remove `grant` (journaled: `hitl undo` puts it back)."""
    return apply_plan(revoke_plan(repo, label, grant, operator))
