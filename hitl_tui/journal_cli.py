"""`hitl undo` and `hitl history`: registered in `cli.EXTRA_COMMANDS` on import.

Light on purpose (no Textual): every `hitl` invocation imports it.
"""

from __future__ import annotations

import argparse
import json
import sys

from hitl_tui import cli

UNDO_EPILOG = """\
ID is an answer's id from 'hitl history' (a unique prefix is enough); without it, the most
recent answer that is not undone yet.

Every file the answer wrote gets back the exact bytes it had before (the block file is written
again), but only when none of them changed since: otherwise nothing is written and the file
that moved on is named.

exit codes: 0 undone, 2 nothing to undo or unknown ID, 3 a file changed since (nothing
written), 1 anything else.
"""

HISTORY_EPILOG = """\
One line per answer, newest first: when (local time), id, who, repository and block, what was
answered, and whether it was undone. --json prints one array with every recorded detail
(the block, the answer, each file's old and new sha256).
"""


def build_undo() -> argparse.ArgumentParser:
    p = cli._Parser(
        prog=f"{cli.PROG} undo",
        description="Revert an answer byte for byte, the block file included.",
        epilog=UNDO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("id", nargs="?", metavar="ID", help="the answer to undo (default: the last)")
    p.add_argument("--config", metavar="FILE", help="TOML config file (for the operator name)")
    return p


def build_history() -> argparse.ArgumentParser:
    p = cli._Parser(
        prog=f"{cli.PROG} history",
        description="Print the journal of answers: when, who, where, what, undone or not.",
        epilog=HISTORY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("-n", "--limit", type=int, default=0, metavar="N", help="only the N most recent")
    p.add_argument("--all", action="store_true", help="also list the undo entries themselves")
    return p


def run_undo(args: argparse.Namespace) -> int:
    from hitl_tui import journal
    from hitl_tui.config import load_config
    from hitl_tui.textio import printable

    operator = load_config(args.config).operator_name()
    print(printable(journal.undo(args.id, operator=operator)))
    return 0


def run_history(args: argparse.Namespace) -> int:
    from hitl_tui import journal
    from hitl_tui.textio import json_text, printable

    entries = journal.history(include_undos=args.all)
    if args.limit > 0:
        entries = entries[: args.limit]
    if args.json:
        text = json.dumps([e.to_json() for e in entries], ensure_ascii=False, indent=2)
        sys.stdout.write(json_text(text) + "\n")  # undecodable path bytes as \udce9 escapes
        return 0
    if not entries:
        print("no answers in the journal yet")
        return 0
    for e in entries:
        when = e.time.astimezone().strftime("%Y-%m-%d %H:%M")
        if e.undone:
            status = f"undone by {e.undone_operator or '?'} ({e.undone_by})"
        elif e.status == "done":
            status = "done" + (" (finished by recovery)" if e.ended_by == "recovery" else "")
        else:
            status = e.status
        answered = e.answered if len(e.answered) <= 80 else e.answered[:79] + "…"
        line = (
            f"{when}  {e.id}  {e.operator}  {e.block_id} ({e.block_source})  {answered}  [{status}]"
        )
        print(printable(line))
    return 0


cli.EXTRA_COMMANDS["undo"] = (build_undo, run_undo)
cli.EXTRA_COMMANDS["history"] = (build_history, run_history)
