"""`hitl note TARGET TEXT`: reply to a block and keep it blocked ("I add the secret to CI, you
wait for me"). The note goes where the loop and the next operator read it (each format's place:
`Source.plan_note`); the block stays open, so `hitl guard` keeps stopping the loop, no
`[[loop]]` restart runs, and `hitl undo` takes the note back like any answer.

Layer: cli (a client of `answers.service`: `plan_note`, `write_note`).
"""

from __future__ import annotations

import argparse
import sys

from hitl_tui.cli.base import PROG, Parser, add_common, open_inbox, resolve
from hitl_tui.model import StaleError, UsageError
from hitl_tui.textio import printable


def build_note() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} note",
        description="Reply to a block and keep it blocked: write your note where its loop and\n"
        "the next operator read it. The block stays open (guard keeps stopping the loop),\n"
        "no [[loop]] restart runs, and 'hitl undo' takes the note back.",
        epilog="Where the note goes: BLOCKED.md, a dated line under '## Operator notes'; an\n"
        "agenticloop task, its 'Keep blocked, add a note' (a dated note under ## Comments,\n"
        "status unchanged); a GitHub issue, a comment (labels unchanged); an ask over MCP,\n"
        'its "notes" line, which check_answer returns while it says "waiting".\n\n'
        "examples:\n"
        "  hitl note shop 'I add the secret to CI; wait for me'\n"
        "  hitl note billing/T-007 'asking legal, back tomorrow' --dry-run\n\n"
        "exit codes: 0 written, 2 bad usage or input (an empty note, a format that takes\n"
        "none), 3 the block changed or is gone, 1 anything else.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="block file, repository, or id")
    p.add_argument("text", metavar="TEXT", help="the note (one line)")
    add_common(p)
    p.add_argument(
        "--expect",
        metavar="FINGERPRINT",
        help="refuse (exit 3) unless the block still has this fingerprint (from list --json)",
    )
    p.add_argument("--operator", metavar="NAME", help="who writes (default: the config's operator)")
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: with --dry-run the plan (summary, diff, hint), else what "
        "was done (done, entry)",
    )
    return p


def run_note(args: argparse.Namespace) -> int:
    from hitl_tui.answers.service import from_the_file, plan_note, write_note
    from hitl_tui.config import load_config
    from hitl_tui.sources.ssh import wire

    config = load_config(args.config)
    named = args.operator
    if named is not None and not named.strip():
        raise UsageError("--operator is empty")
    operator = named.strip() if named else config.operator_name()
    config, inbox = open_inbox(args, config)
    remote = next((r for r in config.remotes if r.owns(args.target)), None)
    if remote is not None:  # `owner/name#12`: read afresh, sent over its API
        block = remote.read(args.target)
    else:
        inbox, block = resolve(args, inbox)
        block = from_the_file(inbox, block)
    if args.expect and args.expect != block.fingerprint:
        raise StaleError(f"{block.id}: the block changed since {args.expect[:19]}…")
    plan = plan_note(inbox, block, args.text, operator)
    if args.dry_run:
        if args.json:
            _print_json(wire.plan_json(plan, None, None))
        else:
            sys.stdout.write(printable(plan.diff(), keep_newlines=True))
        return 0
    written = write_note(inbox, plan)
    if remote is None:
        inbox.handle([block.path])
        inbox.save_cache()
    if args.json:
        _print_json(wire.done_json(plan, written.done, written.entry, False))
        return 0
    print(f"{printable(block.id)}: " + "; ".join(written.done))
    if plan.hint:
        print(printable(plan.hint))
    return 0


def _print_json(data: dict) -> None:
    from hitl_tui.textio import json_encoder

    sys.stdout.write(json_encoder()(data) + "\n")
