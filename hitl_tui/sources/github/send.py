"""Sending an answer to GitHub: re-read the issue, refuse if it moved, then comment and relabel.

`answers.service.plan_answer` makes the Plan; `apply_remote(plan)` sends it (`backend.apply_sync`
from synchronous code). What was sent is recorded in the answer journal, through the
`RecordSent` it is given (the journal sits above the sources: it is passed in, not imported).
"""

from __future__ import annotations

from hitl_tui.model import Block, HitlError, Plan, StaleError
from hitl_tui.sources.base import RecordSent
from hitl_tui.sources.github import issues as gh
from hitl_tui.sources.github.api import (
    GithubClient,
    GithubError,
    NotFound,
    Secret,
    Unauthorised,
    resolve_token,
)
from hitl_tui.sources.github.issues import GithubSource
from hitl_tui.sources.github.poll import as_secret, bounded, fetch_issue


class PartialAnswer(HitlError):
    """Some requests of an answer were sent and a later one failed; the message says which."""

    exit_code = 1


def _same_text(a: str, b: str) -> bool:
    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n"))

    return norm(a) == norm(b)


async def apply_remote(
    plan: Plan,
    token: Secret | str | None = None,
    client: GithubClient | None = None,
    record: RecordSent | None = None,
) -> list[str]:
    """Send a GitHub plan: re-read the issue, refuse if it moved, then comment and relabel.

    Returns one line per thing done. Raises StaleError (nothing sent), PartialAnswer (what was
    sent and what not; applying the same plan again finishes it without posting twice), or
    another GithubError when the first request already fails (nothing sent). What was sent
    is journaled with `record` (None: not journaled).
    """
    block = plan.block
    src: GithubSource = block.meta["config"]
    own = client is None
    if client is None:
        secret = as_secret(token) if token is not None else resolve_token(src.api_url)
        if not secret:
            raise Unauthorised(
                "no GitHub token: set GITHUB_TOKEN or GH_TOKEN, or run 'gh auth login'"
            )
        client = GithubClient(src.api_url, secret)
    try:
        return await _apply(plan, client, record)
    finally:
        if own:
            await client.aclose()


async def _apply(plan: Plan, client: GithubClient, record: RecordSent | None) -> list[str]:
    block = plan.block
    src: GithubSource = block.meta["config"]
    login: str = block.meta["loop_account"]
    full_name = str(block.repo)
    number: int = block.meta["number"]
    try:
        async with bounded(src):
            issue, raw_comments = await fetch_issue(client, full_name, number)
    except GithubError as exc:
        raise restate(
            exc, f"{block.id}: cannot re-read the issue ({exc}); nothing was sent"
        ) from None
    current = gh.build_block(src, full_name, issue, raw_comments, login)
    comments = [c for c in (gh.Comment.from_json(r) for r in raw_comments) if c is not None]
    marker_id = block.meta.get("marker_id")
    marker = next((c for c in comments if c.id == marker_id), None)
    comment_action = next((a for a in plan.remote if a.kind == "comment"), None)
    posted = None
    if comment_action is not None:
        for comment in comments:
            later = marker is None or (comment.created, comment.id) > (marker.created, marker.id)
            if later and _same_text(comment.body, comment_action.body):
                posted = comment
    if posted is None:
        if current is None:
            raise StaleError(
                f"{block.id}: no longer open (answered, unlabelled or closed meanwhile); "
                "nothing was sent"
            )
        if current.fingerprint != block.fingerprint:
            raise StaleError(f"{block.id}: the block changed since you read it; nothing was sent")
    else:
        # A retry: our comment is there already. Finish only if the loop has not moved on.
        status = gh.newest_status(comments, login)
        if gh.issue_number(issue) is None or issue.get("state") == "closed":
            raise StaleError(f"{block.id}: the issue was closed; nothing more was sent")
        if status is not None and status[0].id != marker_id:
            raise StaleError(
                f"{block.id}: the loop wrote a new marker after your answer; nothing more was sent"
            )
    labels = gh.label_names(issue)
    done: list[str] = []
    for index, action in enumerate(plan.remote):
        path = action.data.get("path", "")
        try:
            if action.kind == "comment":
                if posted is not None:
                    done.append("the comment was already posted")
                    continue
                await client.post(path, {"body": action.body})
                done.append("posted the comment")
            elif action.kind == "remove-label":
                name = action.data["label"]
                if not gh.has_label(labels, name):
                    done.append(f"label {name!r} already removed")
                    continue
                try:
                    await client.delete(path)
                except NotFound:
                    pass  # removed meanwhile: the outcome we wanted
                done.append(f"removed label {name!r}")
            elif action.kind == "add-label":
                name = action.data["label"]
                if gh.has_label(labels, name):
                    done.append(f"label {name!r} already present")
                    continue
                await client.post(path, {"labels": [name]})
                done.append(f"added label {name!r}")
            else:
                raise GithubError(f"unknown action {action.kind!r}")
        except GithubError as exc:
            error = _partial(block, plan, index, done, exc)
            if done:
                _journal(record, plan, done, f"failed: {action.description}")
            raise error from None
    note = _journal(record, plan, done, None)
    return [*done, note] if note else done


def _journal(
    record: RecordSent | None, plan: Plan, done: list[str], problem: str | None
) -> str | None:
    """Record what was sent in the answer journal (`hitl history`) with `record`; never fails
    the answer.

    A GitHub entry has no file steps; `hitl undo` refuses it (a comment cannot be unposted).
    """
    if record is None:
        return None
    summary = f"{plan.block.id}: sent to GitHub: {'; '.join(done)}"
    if problem:
        summary += f"; NOT finished ({problem}): answer again to finish"
    try:
        record(plan, summary, not_undoable(plan.block))
    except (OSError, HitlError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"(the journal could not record it: {reason})"
    return None


def not_undoable(block: Block) -> str:
    """Why hitl cannot undo an answer sent to GitHub (the journal records it)."""
    return (
        f"answered a GitHub issue ({block.id}): hitl cannot undo a posted comment; answer the "
        "issue again or edit it on GitHub"
    )


def _partial(block: Block, plan: Plan, index: int, done: list[str], exc: GithubError) -> HitlError:
    action = plan.remote[index]
    rest = [a.description for a in plan.remote[index + 1 :]]
    reason = " ".join(str(exc).split())
    if not done:
        if action.kind == "comment":
            return restate(
                exc,
                f"{block.id}: could not post the comment ({reason}); nothing else was sent. "
                "If it landed anyway, answering again with the same text finds it and does "
                "not post it twice",
            )
        return restate(exc, f"{block.id}: {action.description} failed ({reason}); nothing was sent")
    text = (
        f"{block.id}: done: {'; '.join(done)}. Failed: {action.description} ({reason})."
        + (f" Not done: {'; '.join(rest)}." if rest else "")
        + " Answer again with the same text to finish (the comment is not posted twice)"
    )
    return PartialAnswer(text)


def restate(exc: GithubError, message: str) -> GithubError:
    """The same kind of failure (its `state`), said with more context."""
    error = GithubError(" ".join(message.split()))
    error.state = exc.state
    return error
