"""`hitl escalate` and `hitl guard`: the commands the agent and its loop runner call.

Registered in `cli.EXTRA_COMMANDS` on import. This module stays light (no httpx, no Textual)
because every `hitl` invocation imports it; the work is in `escalate.py` and the inbox.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hitl_tui import cli

ESCALATE_EPILOG = """\
The question must be one line; context and at least one --attempted are required; give at
least two --choice, each 'option — consequence' (split on an em dash, an en dash, ' -- ',
' - ' or ': '). Choices are labelled A), B), C)... in the order given.

Instead of the flags, --from-file FILE (or '-' for standard input) reads the same content as
a markdown draft with '## Question:', '## Context:', '## Attempted:' and '## Choices:'.

notification, from the environment (a failure is one line on stderr, never fatal):
  LOOPKIT_HITL_CHANNEL         telegram | slack | dial | none (default none)
  LOOPKIT_HITL_TELEGRAM_TOKEN  bot token          LOOPKIT_HITL_TELEGRAM_CHAT  chat id
  LOOPKIT_HITL_TELEGRAM_API    default https://api.telegram.org
  LOOPKIT_HITL_SLACK_WEBHOOK   incoming-webhook URL
  LOOPKIT_HITL_DIAL_CMD        shell command; the message arrives on its standard input
  LOOPKIT_HITL_TIMEOUT         seconds to wait for the channel (default 5)

examples:
  hitl escalate --question 'Should deleting a workspace delete its invoices?' \\
      --context 'Feature delete-workspace, src/workspaces/delete.ts; billing keeps 7 years.' \\
      --attempted 'Searched PROMPT.md and AGENTS.md: no retention rule' \\
      --choice 'Cascade delete — simplest; breaks retention' \\
      --choice 'Keep invoices, detach them — needs a migration'
  hitl escalate --from-file draft.md
  hitl escalate --from-file - < draft.md

exit codes: 2 BLOCKED.md written (stop the loop; the human was notified unless stderr says
otherwise), and only then; 1 anything else: invalid content, BLOCKED.md already exists, a
misspelt or unknown option, a missing value (nothing written, nothing sent; stderr says why
in one line: fix it and run the command again).
"""

GUARD_EPILOG = """\
PATH is a repository (default: the git top level of the current folder), or a folder of
repositories. Every kind of block hitl knows counts: BLOCKED.md, agenticloop task files.

Put it at the top of each iteration of the loop runner:

  while true; do
    hitl guard || exit $?
    claude -p "$(cat PROMPT.md)"
  done

exit codes: 0 not blocked; 2 blocked (the questions are printed) or PATH is unusable, so
the loop stops either way; 1 failure.
"""


class _EscalateParser(cli._Parser):
    """A usage error of `escalate` exits 1: its exit 2 means "BLOCKED.md was written", and a
    loop runner under `set -e` would stop on a misspelt option with nobody asked."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from hitl_tui.escalate import EscalationError

        raise EscalationError(f"{message} (see '{self.prog} --help')")


def build_escalate() -> argparse.ArgumentParser:
    p = _EscalateParser(
        prog=f"{cli.PROG} escalate",
        description="Stop and ask a human: write BLOCKED.md at the repo root, notify the\n"
        "configured channel, and exit 2 so that the loop runner stops.",
        epilog=ESCALATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--question", metavar="TEXT", help="the one-line question to answer")
    p.add_argument(
        "--context", metavar="TEXT", help="what feature, which file, which commit, why now"
    )
    p.add_argument(
        "--attempted",
        metavar="TEXT",
        action="append",
        help="one thing you tried and why it fell short (repeat)",
    )
    p.add_argument(
        "--choice",
        metavar="'OPTION — CONSEQUENCE'",
        action="append",
        help="one way out and what it costs (repeat; at least two)",
    )
    p.add_argument("--from-file", metavar="FILE", help="read a markdown draft ('-': stdin)")
    p.add_argument(
        "--repo", metavar="PATH", help="the repository (default: git top level of the cwd)"
    )
    p.add_argument("--replace", action="store_true", help="overwrite an existing BLOCKED.md")
    return p


def run_escalate(args: argparse.Namespace) -> int:
    from hitl_tui import escalate
    from hitl_tui.model import HitlError

    try:
        return _escalate(args)
    except HitlError as exc:
        if exc.exit_code != escalate.EXIT_BLOCKED:
            raise
        # Exit 2 is kept for "BLOCKED.md was written"; any other error is exit 1.
        raise escalate.EscalationError(str(exc)) from None


def _escalate(args: argparse.Namespace) -> int:
    from hitl_tui import escalate
    from hitl_tui.textio import printable

    flags = [args.question, args.context, args.attempted, args.choice]
    if args.from_file is not None:
        if any(v is not None for v in flags):
            raise escalate.EscalationError(
                "give either --from-file or --question/--context/--attempted/--choice, not both"
            )
        draft = escalate.read_draft(args.from_file)
        esc, ignored = escalate.from_draft(draft)
    else:
        esc = escalate.from_args(args.question, args.context, args.attempted, args.choice)
        ignored = []
    repo = Path(args.repo) if args.repo else escalate.find_repo(Path.cwd())
    outcome = escalate.escalate(esc, repo, os.environ, replace=args.replace)
    for title in ignored:
        print(
            f"hitl: left out the draft's section {printable(title)!r} "
            "(BLOCKED.md has four sections)",
            file=sys.stderr,
        )
    if outcome.failure:
        print(f"hitl: {outcome.channel} not notified: {outcome.failure}", file=sys.stderr)
    where = printable(str(outcome.path))
    if outcome.channel == "none":
        told = "no channel configured"
    elif outcome.failure:
        told = f"{outcome.channel} failed"
    else:
        told = f"notified via {outcome.channel}"
    print(f"blocked: wrote {where} ({told}); stop now and wait for the human")
    return escalate.EXIT_BLOCKED


def build_guard() -> argparse.ArgumentParser:
    p = cli._Parser(
        prog=f"{cli.PROG} guard",
        description="Exit 2 and print the pending questions while a repository is blocked;\n"
        "exit 0 otherwise. The gate a loop runner checks before each iteration.",
        epilog=GUARD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="repository or folder of them")
    return p


def run_guard(args: argparse.Namespace) -> int:
    from hitl_tui.escalate import EXIT_BLOCKED, find_repo
    from hitl_tui.inbox import Inbox
    from hitl_tui.textio import printable

    path = Path(args.path) if args.path else find_repo(Path.cwd())
    inbox = Inbox.open([path])
    blocks = inbox.sorted_blocks()
    for block in blocks:
        state = block.state + (f" ({block.category})" if block.category else "")
        line = f"{block.id}: {state}: {block.one_line_question()}"
        print(printable(line))
    return EXIT_BLOCKED if blocks else 0


cli.EXTRA_COMMANDS["escalate"] = (build_escalate, run_escalate)
cli.EXTRA_COMMANDS["guard"] = (build_guard, run_guard)
