"""`hitl demo`: a throw-away workspace of sample repos, and a simulated agent that blocks later.

Everything is written inside one temp folder, which is removed on exit (unless --keep): the
sample repos (`repos/`) and the demo's own state folder (`state/`: journal, locks). The
samples show the variants of FORMATS.md §1.2 a real inbox meets: the canonical shape, lower-case
headings with CRLF and numbered choices, a file with no sections at all, agent text full of
markup that must show literally, and agenticloop task files when that source is installed; and
the asks of an agent that asks through `hitl mcp` (a question, a permission prompt).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

SHOP_BLOCKED = """\
# Blocked

## Question:
Should deleting a workspace also delete its archived invoices, or keep them for 7 years?

## Context:
Feature: "delete workspace" (IMPLEMENTATION_PLAN.md, step 3).
File: src/workspaces/delete.ts; last commit a1b2c3d "feat(workspaces): soft-delete flag".
PROMPT.md says "delete removes all workspace data" but the billing module's
retention note requires invoices to survive 7 years.

## Attempted:
- Searched PROMPT.md, AGENTS.md and the last 3 commits for a retention rule: none found.
- Drafted a cascade delete: /verify rejected it as a silent decision.
- Drafted keep-invoices: /verify rejected it as off-spec.

## Choices:
- A) Cascade delete everything — simplest; breaks the invoice retention promise.
- B) Keep invoices, detach them from the workspace — needs a migration adding owner_id.
- C) Block deletion while invoices exist — no data loss; users must contact support.
"""

SHOP_PROMPT = """\
# PROMPT.md

## Goal
Workspace owners can delete a workspace from Settings in one confirmed step.

## Done when
- `npm test -- workspaces` is green.
- Deleting a workspace removes members, projects and files.

## Never touch
- `src/billing/export/**`

## Stop if
- More than 8 files outside `src/workspaces/` change.
"""

SHOP_PLAN = """\
STATUS: in-progress

# Implementation plan

## Steps
- [x] 1. Soft-delete flag on workspaces (a1b2c3d)
- [x] 2. Settings button and confirm dialog (d4e5f6a)
- [ ] 3. Delete cascade and invoice handling
- [ ] 4. Audit log entry

## Notes for the next session
- 2026-11-28: /verify failed twice on step 3; escalated instead of a third try.
"""

API_BLOCKED = (
    "### question\r\n"
    "Rate-limit the public API per API key or per IP address?\r\n"
    "### context\r\n"
    "src/middleware/ratelimit.ts, step 5 of the plan. PROMPT.md says 'protect the API' only.\r\n"
    "Keys are shared by whole teams; IPs are shared behind corporate NATs.\r\n"
    "### what I tried\r\n"
    "* Read AGENTS.md and docs/api.md: no rule.\r\n"
    "* Per-key limit: load test starved a 40-person team.\r\n"
    "### options\r\n"
    "1) Per API key -- fair per customer; big teams hit the limit together.\r\n"
    "2) Per IP address -- simple; NATed offices share one budget.\r\n"
    "3) Both, the stricter wins -- most robust; two counters in Redis.\r\n"
)

DOCS_BLOCKED = """\
I cannot tell whether the changelog for 2.0 should be written for end users or for
integrators. The release notes template has both audiences and PROMPT.md does not say.
Which one should I write for?
"""

MOBILE_BLOCKED = """\
# Blocked: push notifications

## Question
Ship the [b]bold[/b] "[@click=app.quit]Quit[/]" banner text literally, or strip the brackets?

## Context
The designer's copy contains square brackets: [red]urgent[/red] and [/x].
An agent must never be able to style or click anything in the operator's terminal.

## Attempted
- Rendered it in the app: the brackets are shown as text (good).

## Choices
- A) Keep the brackets — the copy is shown exactly as written.
- B) Strip them — cleaner, but the copy changes.

## Notes from the agent
This section is not one of the four; hitl keeps it and shows it under "More".
"""

INFRA_BLOCKED = """\
# Blocked

## Question:
May I rotate the staging database password now, which logs out every staging session?

## Context:
Task: rotate leaked credentials (IMPLEMENTATION_PLAN.md step 2).
The old password appeared in a CI log on 2026-11-28.

## Attempted:
- Rotated the API keys: done, no downtime.
- Looked for a maintenance window in AGENTS.md: none defined.

## Choices:
- A) Rotate now — staging users are logged out for a minute.
- B) Rotate tonight at 02:00 UTC — the leaked password stays valid until then.
"""

BILLING_PROJECT = """\
---
task_backend: files
task_file_template: .agenticloop/tasks/{taskId}.md
---

# Project map

Billing service. Tasks live in `.agenticloop/tasks/`.
"""

BILLING_T007 = """\
---
task_id: T-007
status: blocked
block_category: contract
backend: files
type: change-request
# Minimalism discipline: none | lite | full | ultra.
minimalism: none
attempt_budget: 3
allowed_paths: ["src/storage/", "test/storage.test.js", "docs/architecture.md"]
---

# T-007 - Switch session storage from SQLite to Postgres

## Task
Replace the SQLite session store with a Postgres-backed store behind the existing SessionStore \
interface.

## Scope
- Add `src/storage/postgres.js` implementing SessionStore.

## Comments
- 2026-11-27: Blocked (contract): change-request approval gate. Checked: docs/architecture.md \
still locks SQLite; the docs-only update is drafted in commit abc1234. Tried: nothing in code, \
per the change-request gate. Needed: a human reviews the doc change and approves it. Who can \
unblock: the project owner. Recommended default: approve, because Postgres already runs in \
production.
- 2026-11-26: Task created from the storage plan.
"""

BILLING_T012 = """\
---
task_id: T-012
status: needs_context
backend: files
attempt_budget: 3
allowed_paths: ["src/invoices/"]
---

# T-012 - Round invoice totals per line or per invoice

## Task
Make invoice rounding match the accounting export.

## Comments
- 2026-11-28: needs_context (context_reason: context_overflow). Questions for the maintainer:
  1. Should rounding happen per line or on the invoice total? Checked: the export rounds per \
line, the PDF per total. Recommended: per line, to match the export. Who: maintainer.
  2. Which rounding mode for halves? Checked: no config key exists. Missing evidence: the \
accountant's rule. Who: project owner.
"""

BILLING_T003 = """\
---
task_id: T-003
status: in-progress
backend: files
---

# T-003 - Add VAT number to customer profile

## Task
Store and validate the VAT number on the customer profile.

## Comments
- 2026-11-25: Started.
"""

#: repo -> {relative path: (text, age in minutes)}
SAMPLES: dict[str, dict[str, tuple[str, int]]] = {
    "shop": {
        "BLOCKED.md": (SHOP_BLOCKED, 190),
        "PROMPT.md": (SHOP_PROMPT, 3000),
        "IMPLEMENTATION_PLAN.md": (SHOP_PLAN, 200),
    },
    "mobile": {"BLOCKED.md": (MOBILE_BLOCKED, 125), "PROMPT.md": ("# PROMPT.md\n", 4000)},
    "api": {"BLOCKED.md": (API_BLOCKED, 48)},
    "docs": {"BLOCKED.md": (DOCS_BLOCKED, 17)},
    "billing": {
        ".agenticloop/project.md": (BILLING_PROJECT, 9000),
        ".agenticloop/tasks/T-007.md": (BILLING_T007, 1500),
        ".agenticloop/tasks/T-012.md": (BILLING_T012, 400),
        ".agenticloop/tasks/T-003.md": (BILLING_T003, 5000),
    },
    "infra": {"PROMPT.md": ("# PROMPT.md\n\n## Goal\nRotate leaked credentials.\n", 600)},
    "web": {"PROMPT.md": ("# PROMPT.md\n\n## Goal\nA faster landing page.\n", 600)},
}


#: What the agent in `web` (Claude Code, headless, through `hitl mcp`) asked: a question and a
#: permission prompt, as (ask id, age in minutes, the ask's own fields). Fixed ids, so the
#: README's screenshots show the same ones.
WEB_ASKS: tuple[tuple[str, int, dict[str, object]], ...] = (
    (
        "ask-demoq7k2m9",
        35,
        {
            "kind": "question",
            "question": "The hero image is 2.4 MB. Convert it to AVIF, or keep the PNG?",
            "context": "Lighthouse: LCP 4.1 s on mobile, 3.3 s of it the hero image.\n"
            "PROMPT.md asks for LCP under 2.5 s; the brand guide says the PNG is the master.",
            "attempted": ["Lazy-loading the hero: LCP got worse (it is above the fold)."],
            "choices": [
                "A — AVIF with a PNG fallback — LCP about 1.9 s; a build step more",
                "B — Keep the PNG, compressed — LCP about 3.0 s; misses the goal",
            ],
        },
    ),
    (
        "ask-demop4x8n3",
        6,
        {
            "kind": "permission",
            "tool": "Bash",
            "input": {
                "command": "rm -rf dist/ && npm run build",
                "description": "Clean build of the landing page",
            },
        },
    ),
)


def build_asks(root: Path, now: float | None = None) -> list[Path]:
    """Write WEB_ASKS into `root/web/.hitl/asks/` (as `hitl mcp` files them); returns the
    files. Apart from build_workspace, so that the tests' demo workspace stays as it was."""
    from datetime import UTC, datetime

    from hitl_tui.sources.asks import format as fmt

    now = time.time() if now is None else now
    folder = root / "web" / fmt.HITL_DIR
    (folder / fmt.ASKS_DIR).mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_bytes(fmt.GITIGNORE)
    paths = []
    for ask_id, minutes, fields in WEB_ASKS:
        stamp = now - minutes * 60
        record: dict[str, object] = {
            "hitl_ask": fmt.VERSION,
            "id": ask_id,
            "status": "open",
            "asked": datetime.fromtimestamp(stamp, UTC).isoformat(),
            "client": "claude-code",
            **fields,
        }
        tool_input = fields.get("input")
        if isinstance(tool_input, dict):
            record["input_sha"] = fmt.input_sha(tool_input)
        path = folder / fmt.ASKS_DIR / f"{ask_id}.json"
        path.write_bytes(fmt.render(record))
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def build_workspace(root: Path, now: float | None = None) -> list[Path]:
    """Write the sample repos under `root` (each with a `.git` folder); returns them."""
    now = time.time() if now is None else now
    repos = []
    for name, files in SAMPLES.items():
        repo = root / name
        (repo / ".git").mkdir(parents=True, exist_ok=True)
        for rel, (text, minutes) in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
            stamp = now - minutes * 60
            os.utime(path, (stamp, stamp))
        repos.append(repo)
    return repos


#: The demo's past answers (`build_history`): repo -> (questions asked before, the wait's scale
#: in minutes). Other questions than the blocks open now (none reads as asked again).
PAST = {
    "shop": (("Which currency should refunds be issued in?", "Retry failed webhooks?"), 150),
    "mobile": (("Ship the dark theme behind a flag?", "Keep iOS 15 support?"), 70),
    "api": (("Rate-limit per token or per IP?", "404 or 410 for deleted users?"), 25),
    "docs": (("Move the guides to the new site now?",), 10),
}


def build_history(root: Path, now: float | None = None, days: int = 14) -> int:
    """A fortnight of answers in the state folder's journal, for the stats screen (`S`) and the
    history (`h`) of the demo: answers to other questions of the sample repos, journaled by
    hitl's own `journal.begin` and `commit` (each a real plan of the block open now, never
    applied), then dated into the past, each with when its block began, a block file of its
    own (none open) and marked not undoable (`u` and `hitl undo` say so). Returns how many
    answers were written. Call before the app starts, on a fresh state folder."""
    import json

    from hitl_tui import journal
    from hitl_tui.answers.service import plan_answer
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.model import Answer

    now = time.time() if now is None else now
    templates = {}
    inbox = Inbox.open([root / name for name in PAST])
    for open_block in inbox.sorted_blocks():
        if Path(open_block.repo).name in PAST and open_block.choices:
            answer = Answer(choice=open_block.choices[0], operator="Ada")
            plan = plan_answer(inbox, open_block, answer)
            journal.commit(journal.begin(plan))
    active = journal.journal_file()
    lines = [json.loads(line) for line in active.read_bytes().splitlines()]
    for record in lines:
        if record["type"] == "begin":
            templates[Path(record["repo"]).name] = record
    commit = next(r for r in lines if r["type"] == "commit")
    out = []
    n = 0
    for day in range(days, 0, -1):
        for name, (questions, scale) in PAST.items():
            # A quiet weekend, and a busier day now and then: a shape to read, not noise.
            busy = 3 if scale > 60 else 2
            count = 0 if day % 7 in (0, 6) else 1 + (day * 7 + len(name)) % busy
            for k in range(count):
                template = templates.get(name)
                if template is None:
                    continue
                at = now - day * 86400 + (9 + 3 * k + len(name) % 4) * 3600
                wait = scale * 60 * (0.3 + ((day * 13 + k * 7 + len(name)) % 10) / 4)
                stamp = _iso(at)
                entry = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(at))}-d{n:05x}"
                block = {**template["block"], "since": _iso(at - wait)}
                block["question"] = questions[(day + k) % len(questions)]
                # A block file of its own (`u` on an open block is not about these), and
                # never undone (its files are not the answer's): said so, as a remote's is.
                block["path"] = str(Path(template["repo"]) / "past" / f"BLOCKED-{n}.md")
                block["not_undoable"] = "a past answer the demo made up (for S): not undoable"
                begin = {**template, "id": entry, "time": stamp, "block": block}
                out += [begin, {**commit, "id": entry, "time": stamp}]
                n += 1
    data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in out)
    from hitl_tui.fsio import atomic_write

    atomic_write(active, data)
    return n


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat()


def simulated_agent(repo: Path, delay: float, stop: threading.Event) -> None:
    """After `delay` seconds, block like a loopkit agent: write BLOCKED.md atomically."""
    if stop.wait(delay):
        return
    from hitl_tui.fsio import atomic_write

    atomic_write(repo / "BLOCKED.md", INFRA_BLOCKED.encode("utf-8"))


def run_demo(keep: bool = False, agent_delay: float = 5.0, notices: list[str] | None = None) -> int:
    """The app on sample repos in a temp folder, which also holds the demo's own state folder.

    The demo's answers, their journal, the locks and `u`/`h` use `<temp>/state`, never the
    operator's state folder (`HITL_STATE_DIR` is pointed there for the run and put back), so
    `hitl history` and the first `u` of the next real run know nothing of the demo.
    """
    from hitl_tui.config import load_config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace

    base = Path(tempfile.mkdtemp(prefix="hitl-demo-"))
    root = base / "repos"
    stop = threading.Event()
    operator_state = os.environ.get("HITL_STATE_DIR")
    os.environ["HITL_STATE_DIR"] = str(base / "state")
    try:
        build_workspace(root)
        build_asks(root)
        build_history(root)
        config = load_config(None)
        inbox = Inbox(Workspace.discover([root]))
        if agent_delay > 0:
            threading.Thread(
                target=simulated_agent, args=(root / "infra", agent_delay, stop), daemon=True
            ).start()
        from hitl_tui.tui.app import HitlApp

        app = HitlApp(inbox, config=config, notices=notices)
        app.run()
        return app.return_code or 0
    finally:
        stop.set()
        if operator_state is None:
            os.environ.pop("HITL_STATE_DIR", None)
        else:
            os.environ["HITL_STATE_DIR"] = operator_state
        if keep:
            print(f"hitl demo: the workspace is kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
