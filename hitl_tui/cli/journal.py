"""`hitl undo` and `hitl history`: listed in `cli.COMMANDS`.

Light on purpose (no Textual): every `hitl` invocation imports it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hitl_tui.cli import base as cli_base

if TYPE_CHECKING:
    from hitl_tui.journal import Entry

#: Answers a page of `hitl history`.
PAGE = 50

UNDO_EPILOG = """\
ID is an answer's id from 'hitl history', or any unique part of it (the time, or the random
tail such as 3f9a1c), or a block's id from 'hitl list' or a unique suffix of it (svc-one: that
block's last answer not undone yet); without it, the most recent answer not undone yet.

A batch's id (batch-..., from 'hitl answer' of many blocks or 'hitl history') undoes every
answer of the batch, each as one answer is undone and each refused on its own (the file or
what the loop did is named); the others are still undone. Exit 3 when one was refused.

Every file the answer wrote gets back the exact bytes it had before (the block file is written
again), but only when none of them changed since: otherwise nothing is written and the file
that moved on is named.

When the loop has acted on the answer since (a commit after it, its task's status or files
changed, it asked again: the signs 'hitl status' watches for), the undo is refused and says
what the loop did: the old block and files would go back under the loop's work. --force
undoes it anyway (the files must still be unchanged).

exit codes: 0 undone, 2 nothing to undo or unknown ID, 3 a file changed since, or the loop
has acted on the answer (nothing written), 1 anything else.
"""

HISTORY_EPILOG = """\
One line per answer, newest first: when (local time), id, who, repository and block, what was
answered, whether it was undone, and what its loop did since (`[done]  loop waiting`, `loop
resumed 14:02`, `loop not resumed`: see hitl status). --json prints one array with every
recorded detail (the block, the answer, each file's old and new sha256, and `loop`:
{"state", "resumed_at", "how"}, or null when hitl watched no loop for it, or it was undone).

A batch (many blocks answered at once) is one line: its id, how many blocks, what was
answered, how many were undone; with --json one object {"batch", "time", "operator",
"answers", "undone", "entries": [each answer's object, as above]}.

It shows 50 answers a page (-n N; --page 2 the 50 before them; -n 0 every one). The journal
keeps answers for `journal_keep` in the config (default "90d"): older ones are pruned, with the
saved bytes only they named, when the journal is rotated.

With PATH..., only the answers in those repositories, or in repositories under those folders
(a GitHub repository is named owner/name): `hitl history ~/src/shop`, `hitl history ~/src`.

A malformed journal record is skipped and named on stderr; the rest is shown.
"""


def build_undo() -> argparse.ArgumentParser:
    p = cli_base.Parser(
        prog=f"{cli_base.PROG} undo",
        description="Revert an answer byte for byte, the block file included.",
        epilog=UNDO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("id", nargs="?", metavar="ID", help="the answer to undo (default: the last)")
    p.add_argument("--config", metavar="FILE", help="TOML config file (for the operator name)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object: {"protocol", "undone": the entry undone, "message"}',
    )
    p.add_argument("--operator", metavar="NAME", help="who undoes (default: the config's operator)")
    p.add_argument(
        "--force",
        action="store_true",
        help="undo even when the loop has acted on the answer since (a commit after it)",
    )
    return p


def build_history() -> argparse.ArgumentParser:
    p = cli_base.Parser(
        prog=f"{cli_base.PROG} history",
        description="Print the journal of answers: when, who, where, what, undone or not.",
        epilog=HISTORY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="only answers in these repositories or under these folders (GitHub: owner/name)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument(
        "-n",
        "--limit",
        type=int,
        default=PAGE,
        metavar="N",
        help=f"N a page (default {PAGE}; 0: all)",
    )
    p.add_argument("--page", type=int, default=1, metavar="K", help="the K-th page (default 1)")
    p.add_argument("--all", action="store_true", help="also list the undo entries themselves")
    return p


def repo_matcher(paths: list[str]) -> Callable[[Entry], bool]:
    """Whether an answer was given in one of `paths`: a repository, a folder above some, or a
    remote repository's name (`acme/shop`). A path need not exist any more (a removed repo)."""
    import os
    from pathlib import Path

    wanted: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        wanted.update({Path(os.path.abspath(path)), path.resolve()})
    names = {raw.strip("/") for raw in paths}

    def matches(entry: Entry) -> bool:
        if entry.remote or not isinstance(entry.repo, Path):
            return str(entry.repo) in names
        repo = entry.repo
        for form in {Path(os.path.abspath(repo)), repo.resolve()}:
            if form in wanted or any(parent in wanted for parent in form.parents):
                return True
        return False

    return matches


def run_undo(args: argparse.Namespace) -> int:
    from hitl_tui.answers.service import undo_answer
    from hitl_tui.config import load_config
    from hitl_tui.model import UsageError
    from hitl_tui.textio import printable

    config = load_config(args.config)
    cli_base.use_config(config)
    from datetime import UTC, datetime

    from hitl_tui.loops.similarity import remember_recent

    named = getattr(args, "operator", None)
    if named is not None and not named.strip():
        raise UsageError("--operator is empty")
    operator = named.strip() if named else config.operator_name()
    from hitl_tui.journal.batches import is_batch_id

    if args.id is not None and is_batch_id(args.id):
        from hitl_tui.cli.batch import run_undo_batch

        code = run_undo_batch(args, operator, config.remotes)
        remember_recent(datetime.now(UTC))
        return code
    message = undo_answer(args.id, operator, config.remotes, force=args.force)
    if args.json:
        from hitl_tui.sources.ssh.wire import PROTOCOL
        from hitl_tui.textio import json_encoder

        data = {"protocol": PROTOCOL, "undone": message.entry, "message": str(message)}
        print(json_encoder()(data))
    else:
        print(printable(message))
    remember_recent(datetime.now(UTC))  # `hitl list` no longer says it asks again
    return 0


def run_history(args: argparse.Namespace) -> int:
    from hitl_tui import journal
    from hitl_tui.model import UsageError
    from hitl_tui.textio import json_text, printable

    if args.page < 1 or args.limit < 0:
        raise UsageError("--page must be 1 or more, and -n/--limit 0 or more")
    if args.limit and args.page > 1 and args.page * args.limit > 10**9:
        raise UsageError("--page is past any journal")
    size = args.limit
    skip = (args.page - 1) * size
    # One more than the page: whether there are older ones to point to. A batch (answers
    # given at once) is one line, where its newest answer stands.
    shown: Iterable[Entry] = journal.newest_first(include_undos=args.all)
    if args.paths:
        shown = filter(repo_matcher(args.paths), shown)
    groups = list(itertools.islice(journal.grouped(shown), skip, skip + size + 1 if size else None))
    more = bool(size) and len(groups) > size
    groups = groups[:size] if size else groups
    entries = [e for g in groups for e in g.entries]
    again = " ".join(
        ["hitl history"]
        + [shlex.quote(printable(p)) for p in args.paths]
        + (["--json"] if args.json else [])
        + (["--all"] if args.all else [])
        + ([f"-n {size}"] if size != PAGE else [])
        + [f"--page {args.page + 1}"]
    )
    from hitl_tui.loops.records import loop_word
    from hitl_tui.loops.resume import ResumeBook, loop_states

    loops = loop_states(ResumeBook.for_state()) if entries else {}
    if args.json:

        def row_of(e: Entry) -> dict:
            row = e.to_json()
            record = loops.get(e.id)
            row["loop"] = (
                None
                if record is None or e.undone
                else {
                    "state": record.state,
                    "resumed_at": record.resumed_at.isoformat() if record.resumed_at else None,
                    "how": record.how,
                }
            )
            return row

        rows = [row_of(g.newest) if g.batch is None else _batch_json(g, row_of) for g in groups]
        text = json.dumps(rows, ensure_ascii=False, indent=2)
        sys.stdout.write(json_text(text) + "\n")  # undecodable path bytes as \udce9 escapes
        if more:
            print(f"hitl: older answers: {again}", file=sys.stderr)
        return 0
    if not entries:
        if args.page > 1:
            print("no answers on this page")
        else:
            print(
                "no answers in these repositories"
                if args.paths
                else "no answers in the journal yet"
            )
        return 0
    for group in groups:
        if group.batch is not None:
            print(printable(_batch_line(group)))
            continue
        e = group.newest
        when = e.time.astimezone().strftime("%Y-%m-%d %H:%M")
        if e.undone:
            status = f"undone by {e.undone_operator or '?'} ({e.undone_by})"
        elif e.status == "done":
            status = "done" + (" (finished by recovery)" if e.ended_by == "recovery" else "")
        else:
            status = e.status
        loop = f"  loop {loop_word(loops[e.id])}" if e.id in loops and not e.undone else ""
        answered = e.answered if len(e.answered) <= 80 else e.answered[:79] + "…"
        line = (
            f"{when}  {e.id}  {e.operator}  {e.block_id} ({e.block_source})  {answered}  [{status}]"
            f"{loop}"
        )
        print(printable(line))
    if more:
        print(f"(older answers: {again}; all of them: --limit 0)")
    return 0


def _batch_json(group, row_of: Callable) -> dict:
    """A batch in `hitl history --json`: one object listing its entries (each as an answer's
    object), newest first."""
    newest = group.newest
    return {
        "batch": group.batch,
        "time": newest.time.isoformat(),
        "operator": newest.operator,
        "answers": len(group.entries),
        "undone": sum(1 for e in group.entries if e.undone),
        "entries": [row_of(e) for e in group.entries],
    }


def _batch_line(group) -> str:
    """A batch in `hitl history`: when, its id, who, how many blocks (which), what was
    answered (the first answer's words), and how many were undone."""
    newest, count = group.newest, len(group.entries)
    when = newest.time.astimezone().strftime("%Y-%m-%d %H:%M")
    blocks = ", ".join(e.block_id for e in reversed(group.entries))
    if len(blocks) > 60:
        blocks = blocks[:59] + "…"
    answered = newest.answered if len(newest.answered) <= 60 else newest.answered[:59] + "…"
    undone = sum(1 for e in group.entries if e.undone)
    status = "done" if not undone else "undone" if undone == count else f"{undone} undone"
    return (
        f"{when}  {group.batch}  {newest.operator}  {count} blocks ({blocks})  {answered}  "
        f"[{status}]  (hitl undo {group.batch})"
    )
