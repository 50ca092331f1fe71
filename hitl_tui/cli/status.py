"""`hitl status`: per repository, its open blocks, the answers waiting for their loop, what
resumed (when, and what showed it), and what did not resume in time.

It looks at every waiting answer first (`ResumeBook.check`: the files, then the deadlines),
so what it prints is true now, not only what a running app saw. Exit code 4 when an answer
did not resume (a loop to look at), 5 when a loop's restart failed (the loop was not even
started again), so a cron job or a status bar can alert on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from hitl_tui.cli.base import PROG, Parser, add_common, open_inbox, print_warnings
from hitl_tui.textio import json_text, printable
from hitl_tui.timefmt import age

#: The exit code when an answer did not resume within its loop's resume_within.
NOT_RESUMED_EXIT = 4
#: The exit code when the restart of an answer's loop failed (it wins over NOT_RESUMED_EXIT).
RESTART_FAILED_EXIT = 5
#: The states of an answer, as the rows and the JSON name them, in the order they are listed.
ANSWER_STATES = ("restart_failed", "not_resumed", "waiting", "resumed")
JSON_FORMAT = 1

EPILOG = """\
For each repository with an open block or an answer hitl watched (the last 7 days):
  open blocks     how many, and how long the oldest has waited
  waiting         answered; hitl waits for the loop to act on it (until resume_within,
                  10 min unless the [[loop]] says otherwise)
  resumed         the loop acted on the answer: when, and what showed it (a new commit,
                  PROMPT.md changed by the loop, the task's status moved on, asked again)
  not resumed     no sign within resume_within: look at the loop ('hitl restart ID'
                  restarts it and waits again)
  restart failed  the [[loop]] restart run for it failed (exit 127, not found, timed out):
                  the loop was not started again; its output is in the log named
                  ('hitl restart ID' runs it again)

--json prints one object:
  {"format": 1, "now": TIME,
   "counts": {"repos", "open", "waiting", "resumed", "not_resumed", "restart_failed"},
   "repos": [{"repo", "name", "open": {"count", "oldest_since"},
              "waiting": [ANSWER], "resumed": [ANSWER], "not_resumed": [ANSWER],
              "restart_failed": [ANSWER]}]}
  ANSWER: {"id", "entry", "source", "path", "title", "question", "answered", "answered_at",
           "deadline", "state", "resumed_at", "how", "restarts", "restart_problem",
           "restart_log", "restart_at"}
  TIME is ISO 8601; entry is the journal id (hitl history), or null. state is one of
  waiting, resumed, not-resumed, restart-failed; restarts counts the restarts run since the
  answer (R, hitl restart) and any that failed (the answer's own included);
  restart_problem ("exit 127", "not found: tmux", "timed out after 30 s") and restart_log
  (the file with its output) say why the last one failed, null once one succeeded.

examples:
  hitl status
  hitl status ~/loops --json | jq '.repos[] | select(.not_resumed != [])'

Each [[remote]] host is asked at once, for list_timeout_seconds at most (5); one that
does not answer is one stderr line, and the rest is shown.

exit codes: 0 nothing failed to resume; 4 an answer did not resume in time; 5 the restart
of an answer's loop failed (before 4); 2 bad usage; 1 anything else."""


def build_status() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} status",
        description="Per repository: its open blocks, the answers waiting for their loop,\n"
        "what resumed and when, and what did not resume in time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--local",
        action="store_true",
        help="only the blocks in files: no remote backend of the config (GitHub, [[remote]])",
    )
    return p


def _answer(record) -> dict:
    def when(t):
        return t.isoformat() if t is not None else None

    return {
        "id": record.block_id,
        "entry": record.entry,
        "source": record.source,
        "path": record.path,
        "title": record.title,
        "question": record.question,
        "answered": record.answered,
        "answered_at": when(record.answered_at),
        "deadline": when(record.deadline),
        "state": record.state,
        "resumed_at": when(record.resumed_at),
        "how": record.how,
        "restarts": record.restarts,
        "restart_problem": record.restart_problem,
        "restart_log": record.restart_log,
        "restart_at": when(record.restart_at),
    }


def gather(inbox, now: datetime) -> list[dict]:
    """One row per repository with something to say, in the workspace's order (remote
    scopes after): its open blocks and its answers by state."""
    book = inbox.resumes
    records = book.recent() if book is not None else []
    rows: dict[str, dict] = {}

    def row(repo: str, name: str) -> dict:
        if repo not in rows:
            rows[repo] = {
                "repo": repo,
                "name": name,
                "open": {"count": 0, "oldest_since": None},
                **{state: [] for state in ANSWER_STATES},
            }
        return rows[repo]

    local = {os.fsdecode(r): r for r in inbox.workspace.repos}
    for key in local:
        row(key, inbox.workspace.id_of(local[key]))
    for block in inbox.sorted_blocks():
        repo = os.fsdecode(block.repo) if isinstance(block.repo, Path) else str(block.repo)
        name = inbox.workspace.id_of(block.repo) if isinstance(block.repo, Path) else repo
        shown = row(repo, name)["open"]
        shown["count"] += 1
        if shown["oldest_since"] is None or block.since < shown["oldest_since"]:
            shown["oldest_since"] = block.since
    remotes = {s.name for s in inbox.remotes}
    for record in records:
        if record.repo not in local and record.source not in remotes:
            continue  # another workspace's answer
        target = row(record.repo, local_name(inbox, local, record.repo))
        target[record.state.replace("-", "_")].append(record)
    return [r for r in rows.values() if r["open"]["count"] or _answers(r)]


def local_name(inbox, local: dict, repo: str) -> str:
    return inbox.workspace.id_of(local[repo]) if repo in local else repo


def _answers(row: dict) -> bool:
    return any(row[state] for state in ANSWER_STATES)


def run_status(args: argparse.Namespace) -> int:
    _config, inbox = open_inbox(args)
    for remote in () if args.local else inbox.remotes:
        remote.read_into(inbox, lambda text: print(f"hitl: {printable(text)}", file=sys.stderr))
    print_warnings(inbox)
    now = datetime.now(UTC)
    if inbox.resumes is not None:
        inbox.resumes.check(now)
    rows = gather(inbox, now)
    counts = {
        "repos": len(rows),
        "open": sum(r["open"]["count"] for r in rows),
        "waiting": sum(len(r["waiting"]) for r in rows),
        "resumed": sum(len(r["resumed"]) for r in rows),
        "not_resumed": sum(len(r["not_resumed"]) for r in rows),
        "restart_failed": sum(len(r["restart_failed"]) for r in rows),
    }
    code = NOT_RESUMED_EXIT if counts["not_resumed"] else 0
    if counts["restart_failed"]:
        code = RESTART_FAILED_EXIT
    if args.json:
        out = {
            "format": JSON_FORMAT,
            "now": now.isoformat(),
            "counts": counts,
            "repos": [
                {
                    "repo": r["repo"],
                    "name": r["name"],
                    "open": {
                        "count": r["open"]["count"],
                        "oldest_since": r["open"]["oldest_since"].isoformat()
                        if r["open"]["oldest_since"]
                        else None,
                    },
                    **{
                        k: [_answer(a) for a in r[k]]
                        for k in ("waiting", "resumed", "not_resumed", "restart_failed")
                    },
                }
                for r in rows
            ],
        }
        sys.stdout.write(json_text(json.dumps(out, ensure_ascii=False, indent=1)) + "\n")
        return code
    if not rows:
        count = len(inbox.workspace.repos)
        print(f"nothing open or waiting in {count} repo{'' if count == 1 else 's'}")
        return code
    for r in rows:
        print(printable(f"{r['name']}  {_headline(r, now)}"))
        for state in ANSWER_STATES:
            label = state.replace("_", " ")
            for a in r[state]:
                shown = a.state_words if state == "restart_failed" else label
                print(printable(f"  {shown:<11}  {a.block_id}  {_line(a, now)}"))
    failed = f", {counts['restart_failed']} restart failed" if counts["restart_failed"] else ""
    print(
        f"{counts['open']} open, {counts['waiting']} waiting for the loop, "
        f"{counts['resumed']} resumed, {counts['not_resumed']} not resumed{failed} "
        f"({counts['repos']} repo{'' if counts['repos'] == 1 else 's'})"
    )
    return code


def _headline(row: dict, now: datetime) -> str:
    shown = row["open"]
    if shown["count"]:
        plural = "" if shown["count"] == 1 else "s"
        return f"{shown['count']} open block{plural} (oldest {age(shown['oldest_since'], now)})"
    return "no open block"


def _clock(t: datetime) -> str:
    return t.astimezone().strftime("%H:%M")


def _line(a, now: datetime) -> str:
    asked = f"answered {_clock(a.answered_at)} ({age(a.answered_at, now)} ago): {a.answered}"
    restarts = f", restarted {a.restarts}x" if a.restarts else ""
    if a.state == "waiting":
        return f"{asked}; waiting until {_clock(a.deadline)}{restarts}"
    if a.state == "restart-failed":
        where = f", output: {a.restart_log}" if a.restart_log else ""
        return (
            f"{asked}; the restart at {_clock(a.restart_at or a.changed_at or now)} failed: "
            f"{a.restart_problem}{where}, {a.restarts} restart{'' if a.restarts == 1 else 's'} "
            f"run (hitl restart {a.block_id})"
        )
    if a.state == "not-resumed":
        return (
            f"{asked}; no sign of the loop by {_clock(a.deadline)}{restarts} "
            f"(hitl restart {a.block_id})"
        )
    when = _clock(a.resumed_at) if a.resumed_at else "?"
    return f"resumed {when}: {a.how or 'the loop acted'}; {asked}"
