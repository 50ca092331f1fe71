"""agenticloop's GitHub backend (FORMATS.md §3): issues, labels and marker comments, as Blocks.

This module is pure: config validation, the marker trust rules, turning one issue plus its
comments into a Block, and planning an answer as remote actions. The network half is
`hitl_tui.sources.github.poll` (polling) and `hitl_tui.sources.github.send` (re-reading,
then sending an answer).

Trust rules, exactly as §3 states them:

- A marker is a line `NAME: value` that starts at column 0 (case-insensitive, blanks around the
  value allowed), outside fenced code, block quotes (including a quoted paragraph's lazy
  continuation lines) and indented code (an indented line never starts at column 0).
- Only comments written by the loop account count (configured `loop_account`, else the token's
  login). Anyone else's marker is ignored. The newest valid status marker wins.
- Pull requests are skipped.

What "open" means:

- **blocked**: the issue is open and carries the blocked label. The label is the loop's own gate,
  so it decides alone; the newest loop marker comment only explains it (category, note).
- **needs_context**: no blocked label, the newest loop status marker is
  `AGENT_TASK_STATUS: needs_context`, and no later comment carries a valid
  `AGENT_CONTEXT_STATUS: provided` line written by the loop account or by someone with write
  access (author_association OWNER, MEMBER or COLLABORATOR). A stranger on a public repo can
  therefore neither create a block nor hide one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from hitl_tui.model import Answer, Block, Choice, Plan, RemoteAction, UsageError
from hitl_tui.sources.agentic_common import ISSUE_CATEGORIES as CATEGORY_MEANINGS
from hitl_tui.sources.agentic_common import first_part, labelled_parts, lettered
from hitl_tui.textio import one_line

SOURCE = "github"
DEFAULT_API = "https://api.github.com"
TRUSTED_ASSOCIATIONS = {"OWNER", "MEMBER", "COLLABORATOR"}
#: GitHub refuses longer comment bodies.
MAX_COMMENT = 65536
#: How much of the issue body the Context pane shows.
MAX_TASK_TEXT = 4000

# -- configuration -----------------------------------------------------------------------------

_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_KEYS = {
    "repo",
    "org",
    "api_url",
    "loop_account",
    "poll_seconds",
    "poll_timeout_seconds",
    "poll_max_requests",
    "labels",
}
_LABEL_KEYS = {"blocked", "approved", "change_request"}


@dataclass(frozen=True)
class Labels:
    blocked: str = "blocked"
    approved: str = "approved"
    change_request: str = "type:change-request"


@dataclass(frozen=True)
class GithubSource:
    """One `[[github]]` table: a repository, or every repository of an organisation."""

    repo: str | None = None
    org: str | None = None
    api_url: str = DEFAULT_API
    loop_account: str | None = None
    poll_seconds: float = 60.0
    #: One poll of this source gives up after this long in all (every request of it) ...
    poll_timeout_seconds: float = 30.0
    #: ... or after this many requests (pages nest: an endless list must not run for ever).
    poll_max_requests: int = 1000
    labels: Labels = field(default_factory=Labels)

    @property
    def scope(self) -> str:
        """The name the app shows for this source: `acme/shop`, `acme/*` for an org, plus the
        host when it is not github.com (`acme/shop (ghe.example.com)`)."""
        base = self.repo if self.repo else f"{self.org}/*"
        if self.api_url.rstrip("/") != DEFAULT_API:
            return f"{base} ({urlsplit(self.api_url).netloc})"
        return base

    def covers(self, full_name: str) -> bool:
        if self.repo:
            return self.repo.casefold() == full_name.casefold()
        owner = full_name.partition("/")[0]
        return bool(self.org) and owner.casefold() == (self.org or "").casefold()


def valid_repo(full_name: str) -> bool:
    owner, sep, name = full_name.partition("/")
    return bool(sep and _OWNER.match(owner) and _NAME.match(name) and name not in (".", ".."))


def parse_config(entries: Sequence[Any]) -> list[GithubSource]:
    """Validate the raw `[[github]]` tables; the first problem is one UsageError line."""
    sources: list[GithubSource] = []
    for index, raw in enumerate(entries, 1):
        where = f"[[github]] #{index}"
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: must be a table")
        unknown = sorted(set(raw) - _KEYS)
        if unknown:
            raise UsageError(
                f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})"
            )
        repo, org = raw.get("repo"), raw.get("org")
        if (repo is None) == (org is None):
            raise UsageError(f'{where}: give exactly one of repo = "owner/name" or org = "name"')
        if repo is not None and (not isinstance(repo, str) or not valid_repo(repo)):
            raise UsageError(f'{where}: repo must be "owner/name"')
        if org is not None and (not isinstance(org, str) or not _OWNER.match(org)):
            raise UsageError(f"{where}: org must be an organisation name")
        api_url = raw.get("api_url", DEFAULT_API)
        parts = urlsplit(api_url) if isinstance(api_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"{where}: api_url must be an http(s) URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise UsageError(f"{where}: api_url must not carry credentials, a query or a fragment")
        account = raw.get("loop_account")
        # Bot accounts end in [bot]; allow that suffix.
        if account is not None and not (
            isinstance(account, str) and _OWNER.match(account.removesuffix("[bot]"))
        ):
            raise UsageError(f"{where}: loop_account must be a GitHub login")
        poll = raw.get("poll_seconds", 60)
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not 1 <= poll <= 86400:
            raise UsageError(f"{where}: poll_seconds must be a number from 1 to 86400")
        deadline = raw.get("poll_timeout_seconds", 30)
        if (
            isinstance(deadline, bool)
            or not isinstance(deadline, int | float)
            or not 1 <= deadline <= 3600
        ):
            raise UsageError(f"{where}: poll_timeout_seconds must be a number from 1 to 3600")
        budget = raw.get("poll_max_requests", 1000)
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= 100000:
            raise UsageError(f"{where}: poll_max_requests must be a whole number from 1 to 100000")
        labels = raw.get("labels", {})
        if not isinstance(labels, dict):
            raise UsageError(f"{where}: labels must be a table")
        bad = sorted(set(labels) - _LABEL_KEYS)
        if bad:
            raise UsageError(
                f"{where}: unknown label {bad[0]!r} (known: {', '.join(sorted(_LABEL_KEYS))})"
            )
        for key, value in labels.items():
            if not isinstance(value, str) or not value.strip() or len(value) > 100 or "\n" in value:
                raise UsageError(f"{where}: labels.{key} must be a label name")
        source = GithubSource(
            repo=repo,
            org=org,
            api_url=api_url.rstrip("/"),
            loop_account=account,
            poll_seconds=float(poll),
            poll_timeout_seconds=float(deadline),
            poll_max_requests=budget,
            labels=Labels(**labels),
        )
        if any(other.scope == source.scope for other in sources):
            raise UsageError(f"{where}: {source.scope} is configured twice")
        sources.append(source)
    return sources


# -- markers -----------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_QUOTE = re.compile(r"^ {0,3}>")
_MARKER = re.compile(r"^(AGENT_[A-Z_]+):[ \t]*(\S+)[ \t]*$", re.IGNORECASE)
_ANY_MARKER = re.compile(r"^\s*AGENT_[A-Z_]+\s*:", re.IGNORECASE | re.MULTILINE)
_TRAILER = re.compile(r"^\s*\[\[\s*agent\s*:.*\]\]\s*$", re.IGNORECASE)


def visible_lines(text: str) -> Iterator[str]:
    """The lines of `text` that are neither fenced code nor block quote (markdown-wise)."""
    fence: tuple[str, int] | None = None
    quoted = False
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if fence is not None:
            m = _FENCE.match(line)
            closes = m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1]
            if closes and m is not None and not m.group(2).strip():
                fence = None
            continue
        m = _FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1)[0], len(m.group(1)))
            quoted = False
            continue
        if _QUOTE.match(line):
            quoted = True
            continue
        if not line.strip():
            quoted = False
            yield line
            continue
        if quoted:
            continue  # a lazy continuation line still belongs to the quote
        yield line


def markers(text: str) -> dict[str, str]:
    """Valid marker lines of one comment: NAME (upper case) -> value (lower case); last wins."""
    found: dict[str, str] = {}
    for line in visible_lines(text):
        m = _MARKER.match(line)
        if m:
            found[m.group(1).upper()] = m.group(2).lower()
    return found


# -- the explanation in a marker comment -------------------------------------------------------

_NUMBERED = re.compile(r"^\s{0,3}(\d{1,2})[.)]\s+(.*)$")


def prose(text: str) -> str:
    """The comment without marker lines and agent trailers: what a human reads."""
    kept = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _MARKER.match(line) or _TRAILER.match(line):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


def numbered_questions(text: str) -> list[str]:
    """`1. ...` items with their continuation lines."""
    items: list[str] = []
    inside = False
    for line in text.split("\n"):
        m = _NUMBERED.match(line)
        if m:
            items.append(m.group(2).strip())
            inside = True
        elif inside and line.strip():
            items[-1] += " " + line.strip()
        else:
            inside = False
    return [i for i in items if i]


def _all(parts: list[tuple[str, str]], *names: str) -> list[str]:
    return [value for label, value in parts if label in names and value]


# -- issues into blocks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    association: str
    created: datetime
    body: str

    @classmethod
    def from_json(cls, raw: Any) -> Comment | None:
        if not isinstance(raw, dict):
            return None
        cid = raw.get("id")
        if not isinstance(cid, int) or isinstance(cid, bool):
            return None
        user = raw.get("user")
        if not isinstance(user, dict):
            user = {}
        return cls(
            id=cid,
            author=_text(user.get("login")),
            association=_text(raw.get("author_association")).upper(),
            created=parse_time(raw.get("created_at")),
            body=_text(raw.get("body")),
        )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_time(value: Any) -> datetime:
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None:
            return when if when.tzinfo else when.replace(tzinfo=UTC)
    return datetime(1970, 1, 1, tzinfo=UTC)


def label_names(issue: dict[str, Any]) -> list[str]:
    names: list[str] = []
    labels = issue.get("labels")
    for label in labels if isinstance(labels, list) else []:
        if isinstance(label, dict):
            label = label.get("name")
        if isinstance(label, str):
            names.append(label)
    return names


def has_label(names: list[str], wanted: str) -> bool:
    return wanted.casefold() in {n.casefold() for n in names}


def is_pull_request(issue: Any) -> bool:
    return isinstance(issue, dict) and "pull_request" in issue


def issue_number(issue: Any) -> int | None:
    if not isinstance(issue, dict):
        return None
    number = issue.get("number")
    if isinstance(number, int) and not isinstance(number, bool) and number > 0:
        return number
    return None


def _frontmatter_type(body: str) -> str | None:
    lines = body.replace("\r\n", "\n").lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:200]:
        if line.strip() in ("---", "..."):
            return None
        m = re.match(r"^type\s*:\s*['\"]?([^'\"#]*?)['\"]?\s*(?:#.*)?$", line, re.IGNORECASE)
        if m:
            return m.group(1).strip().casefold()
    return None


def task_text(body: str) -> str:
    """The issue body's task: the `## Task` section if there is one, else the body."""
    text = body.replace("\r\n", "\n").lstrip("\ufeff")
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], 1):
            if line.strip() in ("---", "..."):
                lines = lines[i + 1 :]
                break
    text = "\n".join(lines).strip()
    m = re.search(r"^#{1,4}\s*Task\s*:?\s*$", text, re.IGNORECASE | re.MULTILINE)
    if m:
        rest = text[m.end() :]
        nxt = re.search(r"^#{1,4}\s", rest, re.MULTILINE)
        text = (rest[: nxt.start()] if nxt else rest).strip()
    if len(text) > MAX_TASK_TEXT:
        text = text[:MAX_TASK_TEXT].rstrip() + " …"
    return text


def newest_status(
    comments: list[Comment], loop_account: str
) -> tuple[Comment, dict[str, Any]] | None:
    """The newest comment by the loop account with a valid AGENT_TASK_STATUS marker."""
    found = None
    account = loop_account.casefold()
    for comment in sorted(comments, key=lambda c: (c.created, c.id)):
        if comment.author.casefold() != account:
            continue
        marks = markers(comment.body)
        if "AGENT_TASK_STATUS" in marks:
            found = (comment, marks)
    return found


def context_provided(comments: list[Comment], after: Comment, loop_account: str) -> bool:
    """A later valid `AGENT_CONTEXT_STATUS: provided` by the loop account or a collaborator."""
    account = loop_account.casefold()
    for comment in comments:
        if (comment.created, comment.id) <= (after.created, after.id):
            continue
        trusted = comment.author.casefold() == account or comment.association in (
            TRUSTED_ASSOCIATIONS
        )
        if trusted and markers(comment.body).get("AGENT_CONTEXT_STATUS") == "provided":
            return True
    return False


#: The signature line hitl ends its comments with (`comment_text`).
_SIGNED = re.compile(r"^— .{1,200}, via hitl$")


def kept_notes(comments: list[Comment], after: Comment | None) -> tuple[str, ...]:
    """The operator's notes posted by hitl that keep the block open ("Keep blocked, add a
    note": signed, no marker line), newer than `after` and than any other comment; oldest
    first, one line each."""
    notes: list[str] = []
    for comment in sorted(comments, key=lambda c: (c.created, c.id), reverse=True):
        if after is not None and (comment.created, comment.id) <= (after.created, after.id):
            break
        lines = [line.strip() for line in comment.body.strip().splitlines() if line.strip()]
        if len(lines) < 2 or not _SIGNED.match(lines[-1]) or _ANY_MARKER.search(comment.body):
            break
        notes.append(f"{comment.created.strftime('%Y-%m-%d')}, {one_line(' '.join(lines[:-1]))}")
    return tuple(reversed(notes))


def build_block(
    src: GithubSource, full_name: str, issue: Any, raw_comments: list[Any], loop_account: str
) -> Block | None:
    """The open block in one issue, or None (not blocked, answered, closed, or a pull request)."""
    number = issue_number(issue)
    if number is None or is_pull_request(issue) or _text(issue.get("state")) not in ("open", ""):
        return None
    comments = [c for c in (Comment.from_json(r) for r in raw_comments) if c is not None]
    names = label_names(issue)
    labelled = has_label(names, src.labels.blocked)
    status = newest_status(comments, loop_account)
    if labelled:
        state = "blocked"
    elif (
        status is not None
        and status[1]["AGENT_TASK_STATUS"] == "needs_context"
        and not context_provided(comments, status[0], loop_account)
    ):
        state = "needs_context"
    else:
        return None

    block_id = f"{full_name}#{number}"
    title = one_line(_text(issue.get("title"))) or None
    body = _text(issue.get("body"))
    problems: list[str] = []
    marker_comment, marks = status if status is not None else (None, {})
    if marker_comment is None:
        problems.append(
            f"No marker comment by {loop_account} explains this block; only the label is set "
            "(if the loop posts as another account, set loop_account in the config)."
        )
    elif state == "blocked" and marks.get("AGENT_TASK_STATUS") != "blocked":
        problems.append(
            f"The newest marker by {loop_account} says AGENT_TASK_STATUS: "
            f"{marks.get('AGENT_TASK_STATUS')}, but the issue carries the "
            f"{src.labels.blocked!r} label."
        )
    category = marks.get("AGENT_BLOCK_CATEGORY") if state == "blocked" else None
    reason = marks.get("AGENT_CONTEXT_REASON")
    note = prose(marker_comment.body) if marker_comment else ""
    head, parts = labelled_parts(note)
    questions = numbered_questions(note) if state == "needs_context" else []
    defaults = [
        first_part(labelled_parts(q)[1], "recommended default", "recommended") for q in questions
    ]

    if state == "needs_context" and questions:
        question = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
    else:
        question = first_part(parts, "needed") or note or (title or block_id)

    gate = (
        state == "blocked"
        and category == "contract"
        and (
            has_label(names, src.labels.change_request)
            or _frontmatter_type(body) == "change-request"
        )
    )

    context_lines = []
    if title:
        context_lines.append(title)
    if category:
        meaning = CATEGORY_MEANINGS.get(category)
        context_lines.append(f"Category: {category}" + (f" — {meaning}" if meaning else ""))
    if reason:
        context_lines.append(f"Context reason: {reason}")
    if gate:
        context_lines.append("Change-request approval gate.")
    if head and state == "blocked" and head != question:
        context_lines.append(head)
    for checked in _all(parts, "checked"):
        context_lines.append(f"Checked: {checked}")
    who = first_part(parts, "who can unblock", "who can answer")
    if who:
        context_lines.append(f"Who can unblock: {who}")
    task = task_text(body)
    if task:
        context_lines.append("Task:\n" + task)
    html_url = _text(issue.get("html_url"))
    if not html_url.startswith(("https://", "http://")):
        html_url = f"{src.api_url}/repos/{full_name}/issues/{number}"
    context_lines.append(html_url)

    default = None
    if state == "needs_context":
        if questions and all(defaults):
            default = "; ".join(f"{i}. {d}" for i, d in enumerate(defaults, 1))
        elif not questions:
            default = first_part(parts, "recommended default", "recommended")
    else:
        default = first_part(parts, "recommended default", "recommended")

    choices = _choices(src, state, default, gate, questions)
    since = marker_comment.created if marker_comment else parse_time(issue.get("created_at"))
    owner, _, name = full_name.partition("/")
    print_fp = {
        "state": state,
        "labels": sorted(
            n.casefold()
            for n in names
            if n.casefold() in {src.labels.blocked.casefold(), src.labels.change_request.casefold()}
        ),
        "marker": [marker_comment.id, marker_comment.body] if marker_comment else None,
        "title": _text(issue.get("title")),
        "body": body,
    }
    digest = hashlib.sha256(json.dumps(print_fp, sort_keys=True).encode("utf-8", "replace"))
    return Block(
        id=block_id,
        source=SOURCE,
        repo=full_name,
        path=html_url,
        state=state,
        question=question,
        context="\n".join(context_lines),
        attempted=tuple(_all(parts, "tried")),
        choices=tuple(choices),
        since=since,
        fingerprint="sha256:" + digest.hexdigest(),
        raw=marker_comment.body if marker_comment else body,
        category=category,
        title=title,
        problems=tuple(problems),
        questions=tuple(questions) if len(questions) > 1 else (),
        defaults=tuple(defaults) if len(questions) > 1 else (default,),
        notes=kept_notes(comments, marker_comment),
        meta={
            "owner": owner,
            "name": name,
            "number": number,
            "scope": src.scope,
            "config": src,
            "loop_account": loop_account,
            "marker_id": marker_comment.id if marker_comment else None,
            "gate": gate,
            "labelled": labelled,
            "default": default,
        },
    )


def _choices(
    src: GithubSource, state: str, default: str | None, gate: bool, questions: list[str]
) -> list[Choice]:
    blocked = src.labels.blocked
    unlabel = f"label {blocked!r} removed" if state == "blocked" else "no label change"
    provided = "ending AGENT_CONTEXT_STATUS: provided"
    rows: list[tuple[str, str, str, bool]] = []
    if default:
        if state == "needs_context":
            rows.append(
                (
                    "default",
                    f"Accept the recommended default: {default}",
                    f"posts a comment with the defaults, {provided}",
                    False,
                )
            )
        else:
            effects = f"posts a comment accepting it; {unlabel}"
            if gate and default.lower().startswith("approv"):
                effects += f", label {src.labels.approved!r} added"
            rows.append(("default", f"Accept the recommended default: {default}", effects, False))
    if gate:
        rows.append(
            (
                "approve",
                "Approve the change request",
                f"posts an approval comment; {unlabel}, label {src.labels.approved!r} added",
                False,
            )
        )
    if state == "needs_context":
        what = "Answer the questions" if questions else "Provide the context"
        rows.append(("resume", what, f"posts your answer as a comment {provided}", True))
        rows.append(
            (
                "keep",
                "Keep waiting, add a note",
                "posts your note as a comment; the task stays needs_context",
                True,
            )
        )
    else:
        rows.append(("resume", "Resume with your answer", f"posts your answer; {unlabel}", True))
        rows.append(
            (
                "keep",
                "Keep blocked, add a note",
                "posts your note as a comment; labels unchanged",
                True,
            )
        )
    return list(lettered(rows))


# -- planning an answer ------------------------------------------------------------------------


def issue_path(block: Block) -> str:
    meta = block.meta
    return f"/repos/{meta['owner']}/{meta['name']}/issues/{meta['number']}"


def _check_text(text: str, what: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise UsageError(f"the {what} is empty")
    for line in text.split("\n"):
        if _TRAILER.match(line):
            raise UsageError(f"the {what} must not carry an agent trailer like [[agent: ...]]")
    if _ANY_MARKER.search(text):
        raise UsageError(
            f"the {what} must not contain marker lines (AGENT_...:): the loop would read them"
        )
    return text


def comment_text(block: Block, answer: Answer) -> tuple[str, str]:
    """(kind of answer, the exact comment body) for `answer`; UsageError when it is empty."""
    if answer.choice is not None:
        kind = next((c.kind for c in block.choices if c.key == answer.choice.key), None)
        if kind is None:
            raise UsageError(f"no choice {answer.choice.key!r} in {block.id}")
    elif answer.texts:
        kind = "resume"
    else:
        raise UsageError("the answer is empty: pick a choice or type an answer")
    note = answer.note.strip() if answer.note and answer.note.strip() else None
    texts = [t for t in answer.texts if t.strip()]
    if answer.decision_override is not None:
        body = _check_text(answer.decision_override, "answer")
    elif kind == "default":
        body = f"Accepted the recommended default: {block.meta.get('default')}"
    elif kind == "approve":
        body = "Approved the change request."
    else:
        if not texts and note:
            texts, note = [note], None
        if not texts:
            what = "note" if kind == "keep" else "answer"
            raise UsageError(f"the {what} is empty: type it (--text, or --note with --choice)")
        if len(texts) > 1 and len(texts) != len(block.questions):
            wanted = len(block.questions) or 1
            raise UsageError(
                f"{block.id} asks {wanted} question{'s' if wanted > 1 else ''}: give one answer "
                f"per question, in order (got {len(texts)})"
            )
        if len(texts) > 1:
            body = "\n\n".join(f"{i}. {_check_text(t, 'answer')}" for i, t in enumerate(texts, 1))
        else:
            body = _check_text(texts[0], "answer")
    lines = [body]
    if note:
        lines += ["", "Note: " + _check_text(note, "note")]
    operator = one_line(answer.operator) or "operator"
    lines += ["", f"— {operator}, via hitl"]
    if block.state == "needs_context" and kind != "keep":
        lines += ["", "AGENT_CONTEXT_STATUS: provided"]
    text = "\n".join(lines) + "\n"
    if len(text) > MAX_COMMENT:
        raise UsageError(f"the comment is {len(text):,} characters; GitHub takes {MAX_COMMENT:,}")
    return kind, text


def plan(block: Block, answer: Answer) -> Plan:
    """The remote actions that answer `block`: one comment, then the label changes."""
    src: GithubSource = block.meta["config"]
    kind, text = comment_text(block, answer)
    base = issue_path(block)
    actions = [
        RemoteAction(
            "comment",
            f"post a comment on {block.id}",
            body=text,
            data={"path": f"{base}/comments", "body": text},
        )
    ]
    if block.state == "blocked" and kind != "keep" and block.meta.get("labelled"):
        name = src.labels.blocked
        actions.append(
            RemoteAction(
                "remove-label",
                f"remove the label {name!r} from {block.id}",
                data={"path": f"{base}/labels/{quote(name, safe='')}", "label": name},
            )
        )
    default = str(block.meta.get("default") or "")
    approves = kind == "approve" or (
        kind == "default" and block.meta.get("gate") and default.lower().startswith("approv")
    )
    if approves:
        name = src.labels.approved
        actions.append(
            RemoteAction(
                "add-label",
                f"add the label {name!r} to {block.id}",
                data={"path": f"{base}/labels", "label": name},
            )
        )
    summary = f"{block.id}: " + "; ".join(a.description.split(" on ")[0] for a in actions)
    number = block.meta["number"]
    hint = (
        f"The loop continues from the issue on its next run; if it is stopped, restart it on "
        f"the task (for example /agenticloop #{number})."
        if kind != "keep"
        else None
    )
    return Plan(block, answer, (), {}, summary, hint=hint, remote=tuple(actions))
