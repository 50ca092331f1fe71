"""`hitl escalate` and `hitl guard`: the commands the agent and its loop runner call.

Listed in `cli.COMMANDS`. This module stays light (no httpx, no Textual) because every
`hitl` invocation imports it; the work is in `agent/escalate.py`, `agent/guard.py` and the
inbox.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hitl_tui.cli import base as cli_base
from hitl_tui.model import HitlError

ESCALATE_EPILOG = """\
The question must be one line; context and at least one --attempted are required; give at
least two --choice, each 'option — consequence' (split on an em dash, an en dash, ' -- ',
' - ' or ': '). Choices are labelled A), B), C)... in the order given.

--category NAME says what kind of block it is (credentials, contract, transient, ...: the
operator filters with cat:NAME); it is written as a 'Category: NAME' line under the title.

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

Put it at the top of each iteration of the loop runner, or before each agent call:

  while true; do
    hitl guard || exit $?
    claude -p "$(cat PROMPT.md)"
  done

--then CMD [ARG ...] wraps the agent call itself: check; run CMD only when not blocked, with
its arguments, standard streams and folder untouched; then check again. Everything after
--then is the command. For a runner that stops only on a failing agent call (the loopkit
run.sh, under set -e), so that an agent that escalates and then exits 0 still stops it:

  LOOPKIT_CLI="hitl guard --then claude -p" ./run.sh

exit codes: 0 not blocked; 2 blocked (the questions are printed) or PATH is unusable, so
the loop stops either way; 1 failure. With --then: 2 if blocked before CMD (CMD is not run)
or after it (CMD left a block); otherwise CMD's own exit code (128+N if a signal N ended
it, 127 if CMD is not found, 126 if it cannot be run).
"""


class _EscalateParser(cli_base.Parser):
    """A usage error of `escalate` exits 1: its exit 2 means "BLOCKED.md was written", and a
    loop runner under `set -e` would stop on a misspelt option with nobody asked."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from hitl_tui.agent.escalate import EscalationError

        raise EscalationError(f"{message} (see '{self.prog} --help')")


def build_escalate() -> argparse.ArgumentParser:
    p = _EscalateParser(
        prog=f"{cli_base.PROG} escalate",
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
    p.add_argument(
        "--category",
        metavar="NAME",
        help="what kind of block, for the operator's cat: filter (credentials, contract, ...)",
    )
    p.add_argument("--from-file", metavar="FILE", help="read a markdown draft ('-': stdin)")
    p.add_argument(
        "--repo", metavar="PATH", help="the repository (default: git top level of the cwd)"
    )
    p.add_argument("--replace", action="store_true", help="overwrite an existing BLOCKED.md")
    return p


def run_escalate(args: argparse.Namespace) -> int:
    from hitl_tui.agent import escalate

    try:
        return _escalate(args)
    except HitlError as exc:
        if exc.exit_code != escalate.EXIT_BLOCKED:
            raise
        # Exit 2 is kept for "BLOCKED.md was written"; any other error is exit 1.
        raise escalate.EscalationError(str(exc)) from None


def _escalate(args: argparse.Namespace) -> int:
    from hitl_tui.agent import escalate
    from hitl_tui.textio import printable

    flags = [args.question, args.context, args.attempted, args.choice]
    if args.from_file is not None:
        if any(v is not None for v in flags):
            raise escalate.EscalationError(
                "give either --from-file or --question/--context/--attempted/--choice, not both"
            )
        draft = escalate.read_draft(args.from_file)
        esc, ignored = escalate.from_draft(draft, args.category)
    else:
        esc = escalate.from_args(
            args.question, args.context, args.attempted, args.choice, args.category
        )
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


class _GuardParser(cli_base.Parser):
    """`guard`'s options, then `--then CMD [ARG ...]`: everything after `--then` is CMD's, so
    it is split off before argparse sees the arguments (CMD's own options stay CMD's)."""

    def parse_intermixed_args(self, args=None, namespace=None):  # type: ignore[override]
        args = list(sys.argv[1:] if args is None else args)
        then: list[str] | None = None
        if "--then" in args:
            at = args.index("--then")
            if "--" not in args[:at]:
                args, then = args[:at], args[at + 1 :]
                if not then:
                    self.error("--then needs a command, e.g. --then claude -p")
        parsed = super().parse_intermixed_args(args, namespace)
        parsed.then = then
        return parsed


def build_guard() -> argparse.ArgumentParser:
    p = _GuardParser(
        prog=f"{cli_base.PROG} guard",
        description="Exit 2 and print the pending questions while a repository is blocked;\n"
        "exit 0 otherwise. The gate a loop runner checks before each iteration.",
        epilog=GUARD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=f"{cli_base.PROG} guard [-h] [PATH] [--then CMD [ARG ...]]",
        allow_abbrev=False,
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="repository or folder of them")
    # Never parsed by argparse (see _GuardParser); here for --help.
    p.add_argument(
        "--then",
        metavar="CMD [ARG ...]",
        help="run CMD only when not blocked, then check again (must come last)",
    )
    return p


def run_guard(args: argparse.Namespace) -> int:
    from hitl_tui.agent.escalate import EXIT_BLOCKED, find_repo
    from hitl_tui.agent.guard import run_then

    path = Path(args.path) if args.path else find_repo(Path.cwd())
    before = _check(path)
    if before or args.then is None:
        return before
    code = run_then(args.then)
    return EXIT_BLOCKED if _check(path) else code


def _check(path: Path) -> int:
    """Print the open blocks under `path`: EXIT_BLOCKED if there are any, else 0."""
    from hitl_tui.agent.escalate import EXIT_BLOCKED
    from hitl_tui.agent.guard import open_blocks
    from hitl_tui.textio import printable

    inbox, blocks = open_blocks(path)
    cli_base.print_warnings(inbox)  # never a reason to stop the loop: the blocks decide
    for block in blocks:
        state = block.state + (f" ({block.category})" if block.category else "")
        line = f"{block.id}: {state}: {block.one_line_question()}"
        print(printable(line), flush=True)
    return EXIT_BLOCKED if blocks else 0
