"""`hitl answer` for many blocks at once (`answers.batch`): by ids, by `--filter`, or by
`--similar ID` (every open block asking the same question), with `--option TEXT` (matched per
block by its text) or `--text`; `hitl undo BATCH`. `cli.commands.cmd_answer` hands over here
when the arguments ask for a batch (`wants_batch`); one block with `--choice`, or `--text`, is
answered as it always was.

Exit codes: 0 every block written; 3 any block refused or skipped (the others are written, and
the output says which); 2 bad input (nothing written); 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hitl_tui.cli.base import open_inbox, print_warnings
from hitl_tui.model import UsageError

if TYPE_CHECKING:
    from hitl_tui.answers.batch import Batch
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.model import Block

#: `hitl answer --help`: how to answer many blocks.
HELP = """\
many blocks at once (one batch: one line in hitl history, hitl undo BATCH undoes it):
  hitl answer ID [ID ...] --option TEXT [PATH ...]
                                              these blocks (a PATH: a folder of repositories)
  hitl answer --filter QUERY --option TEXT [PATH ...]
                                              every block 'hitl list --filter QUERY' lists
  hitl answer --similar ID --option TEXT [PATH ...]
                                              ID and every open block asking the same question
--option picks, in each block, the choice whose text reads TEXT (case, whitespace and
trailing punctuation aside): a block with no such option is skipped. --text answers every
block in your own words instead. --note, --dry-run, --no-restart and --json work with all
three; --json prints one array, an object per block: id, status (written, refused or
skipped; with --dry-run: ready, choose or refused, and the plan), reason, entry. The
[[loop]] restarts start together (4 at a time), after every block is written.
exit codes (many blocks): 0 every block written, 3 any refused or skipped (the others are
written), 2 bad input (nothing written). With --text, words after TARGET that are all
folders keep their meaning when TARGET is found in them (TARGET PATH...: one block).
"""


def check_how(args: argparse.Namespace) -> None:
    """One of --choice, --text, --option (UsageError, in argparse's words, otherwise)."""
    given = [n for n, v in (("--choice", args.choice), ("--text", args.text)) if v is not None]
    if args.option is not None and given:
        raise UsageError(
            f"argument --option: not allowed with argument {given[0]} (see 'hitl answer --help')"
        )
    if args.option is None and not given:
        many = args.filter is not None or args.similar is not None
        raise UsageError(
            "one of the arguments --option --text is required (see 'hitl answer --help')"
            if many
            else "one of the arguments --choice --text is required (see 'hitl answer --help')"
        )


def wants_batch(args: argparse.Namespace) -> bool:
    """Whether `hitl answer`'s arguments ask for a batch: --option, --filter or --similar, or
    --text with several words that are not all folders (`TARGET PATH...` is one block)."""
    if args.option is not None or args.filter is not None or args.similar is not None:
        return True
    words = _words(args)
    if args.text is None or len(words) < 2:
        return False
    return not all(os.path.isdir(w) for w in words[1:])


def may_be_ids(args: argparse.Namespace) -> bool:
    """`TARGET PATH... --text` whose TARGET is in none of the PATHs: the words may all be
    blocks (`hitl answer shop store --text ...`, both repositories here), a batch."""
    return args.text is not None and args.expect is None and len(_words(args)) > 1


def _words(args: argparse.Namespace) -> list[str]:
    return ([args.target] if args.target is not None else []) + list(args.paths or [])


def run_answer(args: argparse.Namespace) -> int:
    """`hitl answer` for a batch: find the blocks, plan, print the plans (--dry-run) or write
    them and restart their loops; the exit code says whether every block was written."""
    from hitl_tui.answers.batch import How, apply_batch, plan_batch
    from hitl_tui.config import load_config

    for flag, name in ((args.choice, "--choice"), (args.expect, "--expect")):
        if flag is not None:
            raise UsageError(f"{name} answers one block: for many, use --option TEXT")
    if args.decision is not None:
        raise UsageError("--decision answers one block (it words one decision)")
    if args.filter is not None and args.similar is not None:
        raise UsageError("--filter and --similar: one of them")
    config = load_config(args.config)
    named = args.operator
    if named is not None and not named.strip():
        raise UsageError("--operator is empty")
    how = How(
        option=args.option,
        texts=tuple(args.text or ()),
        note=args.note,
        operator=named.strip() if named else config.operator_name(),
    )
    inbox, blocks = _blocks(args, config)
    batch = plan_batch(inbox, blocks, how)
    if args.dry_run:
        return _print_plans(batch, args.json, args.no_restart, config.loops)
    done = apply_batch(inbox, batch, restart=False, replan=True)
    written = [i.block.path for i in done.items if i.status == "written"]
    if written:
        inbox.handle(written)  # each answered block leaves the since memory (`cmd_answer`)
        inbox.save_cache()
    _print_done(done, args.json)
    if not args.no_restart:
        _restart(done, inbox, args.json)
    from hitl_tui.loops.similarity import remember_recent

    remember_recent(datetime.now(UTC))
    return 0 if all(i.status == "written" for i in done.items) else 3


def _blocks(args: argparse.Namespace, config) -> tuple[Inbox, list[Block]]:
    """The inbox and the blocks the arguments name (UsageError: none, or an unknown id)."""
    if args.filter is not None or args.similar is not None:
        return _found(args, config)
    from hitl_tui.inbox.workspace import is_repo

    words = _words(args)
    # A folder that is no repository is a PATH to look in (`hitl answer shop api --option X
    # ~/loops`); every other word is a block: an id, a block file, a repository.
    args.paths = [w for w in words if os.path.isdir(w) and not is_repo(Path(w))]
    ids = [w for w in words if w not in args.paths]
    if not ids:
        raise UsageError("name the blocks: ID [ID ...], --filter QUERY or --similar ID")
    config, inbox = open_inbox(args, config)
    print_warnings(inbox)
    extra = _own_repos(inbox, ids)
    if extra:  # blocks named by path in repositories outside the PATHs: one inbox for all
        args.paths = [os.fspath(p) for p in [*inbox.workspace.repos, *extra]]
        config, inbox = open_inbox(args, config)
    return inbox, [inbox.resolve(i) for i in ids]


def _own_repos(inbox: Inbox, ids: list[str]) -> list[Path]:
    """The repositories of the ids that are paths outside the inbox (`base.resolve`)."""
    from hitl_tui.inbox.workspace import is_repo

    found: list[Path] = []
    for word in ids:
        try:
            inbox.resolve(word)
            continue
        except UsageError:
            if not os.path.lexists(word):
                raise
        where = Path(os.path.abspath(word))
        repo = next((f for f in [where, *where.parents] if f.is_dir() and is_repo(f)), None)
        if repo is None or repo in inbox.workspace.repos:
            raise UsageError(f"no open block {word!r} (see 'hitl list')")
        if repo not in found:
            found.append(repo)
    return found


def _found(args: argparse.Namespace, config) -> tuple[Inbox, list[Block]]:
    """--filter QUERY (what `hitl list --filter` lists) or --similar ID (it, and every block
    `hitl list` lists that asks the same question), in the PATHs."""
    from hitl_tui.inbox.view import ViewSpec, listed
    from hitl_tui.loops.similarity import same_question
    from hitl_tui.state.snoozes import SnoozeBook

    if args.target is not None:  # every word is a PATH here
        args.paths = [args.target, *(args.paths or [])]
        args.target = None
    config, inbox = open_inbox(args, config)
    for remote in inbox.remotes:
        remote.read_into(inbox, _warn)
    print_warnings(inbox)
    now = datetime.now(UTC)
    snoozes = SnoozeBook.for_state()
    if args.filter is not None:
        spec = ViewSpec().with_query(args.filter)
        if spec.query.problems:
            raise UsageError(f"--filter: {spec.query.problems[0]}")
        if not args.filter.strip():
            raise UsageError("--filter is empty: name what to answer (every block: --filter '*')")
        blocks = listed(inbox.blocks.values(), spec, snoozes, now)
        if not blocks:
            raise UsageError(f"no open block matches --filter {args.filter!r}; nothing written")
        return inbox, blocks
    first = inbox.resolve(args.similar)
    others = listed(inbox.blocks.values(), ViewSpec(), snoozes, now)
    same = [b for b in others if b.id != first.id and same_question(first, b)]
    return inbox, [first, *same]


def _warn(text: str) -> None:
    from hitl_tui.textio import printable

    print(f"hitl: {printable(' '.join(text.split()))}", file=sys.stderr)


def _print_plans(batch: Batch, as_json: bool, no_restart: bool, loops) -> int:
    from hitl_tui.answers.service import restart_for
    from hitl_tui.textio import json_encoder, printable

    if as_json:
        rows = []
        for item in batch.items:
            row = item.to_json(with_plan=True)
            restart = None if no_restart else restart_for(loops, item.block)
            if row["plan"] is not None:
                row["plan"]["then_runs"] = restart.command if restart is not None else None
            rows.append(row)
        sys.stdout.write(json_encoder()(rows) + "\n")
    else:
        for item in batch.items:
            head = f"== {item.block.id}: {item.status}"
            print(printable(head + (f": {item.reason}" if item.reason else "")))
            if item.plan is not None:
                sys.stdout.write(printable(item.plan.diff(), keep_newlines=True))
        print(printable(_counts(batch, "would be written")), file=sys.stderr)
    return 0 if all(i.status == "ready" for i in batch.items) else 3


def _counts(batch: Batch, written: str = "written") -> str:
    counts = batch.counts
    parts = [
        f"{counts[s]} {written if s in ('written', 'ready') else s}"
        for s in ("written", "ready", "choose", "refused", "skipped")
        if counts.get(s)
    ]
    return f"batch {batch.id}: " + ", ".join(parts)


def _print_done(batch: Batch, as_json: bool) -> None:
    from hitl_tui.textio import json_encoder, printable

    if as_json:
        sys.stdout.write(json_encoder()([i.to_json() for i in batch.items]) + "\n")
        return
    for item in batch.items:
        if item.status == "written":
            print(printable(f"{item.block.id}: written: " + "; ".join(item.done)))
        else:
            print(printable(f"{item.block.id}: {item.status}: {item.reason or ''}"))
    print(printable(_counts(batch)))
    if any(i.status == "written" for i in batch.items):
        print(printable(f"(undo them all: hitl undo {batch.id})"))


def _restart(batch: Batch, inbox: Inbox, as_json: bool) -> None:
    """The restarts of the written blocks' loops, together (`batch.restart_all`); what they
    say goes to stderr with --json (stdout is the array)."""
    from hitl_tui.answers.batch import restart_all
    from hitl_tui.answers.service import Answered
    from hitl_tui.cli import loop as loop_cli

    written = [i for i in batch.items if i.status == "written" and i.plan is not None]
    answered = [
        Answered(i.plan, i.done, i.entry, _waiting(inbox, i)) for i in written if i.plan is not None
    ]
    results = restart_all(answered, inbox.loops, inbox.resumes)
    said: set[int] = set()
    target = sys.stderr if as_json else sys.stdout
    with contextlib.redirect_stdout(target):
        for result in results:
            if result.ran is not None and id(result.ran) not in said:
                said.add(id(result.ran))
                loop_cli.say_restarted(result)


def _waiting(inbox: Inbox, item):
    from hitl_tui.answers.service import waiting_after

    return waiting_after(inbox.resumes, item.block, item.entry)


# -- hitl undo BATCH -----------------------------------------------------------------------------


def run_undo_batch(args: argparse.Namespace, operator: str, remotes) -> int:
    """`hitl undo BATCH`: every answer of the batch undone, each refused on its own where a
    file it wrote changed since or its loop acted on it (unless --force); 0 when none was
    refused, 3 otherwise."""
    from hitl_tui import journal
    from hitl_tui.textio import json_encoder, printable

    results = journal.undo_batch(args.id.strip(), operator, force=args.force, sources=remotes)
    if args.json:
        from hitl_tui.sources.ssh.wire import PROTOCOL

        data = {
            "protocol": PROTOCOL,
            "batch": args.id.strip(),
            "entries": [r.to_json() for r in results],
        }
        print(json_encoder()(data))
    else:
        for r in results:
            line = r.message if r.status == "undone" else f"{r.block_id}: {r.status}: {r.message}"
            print(printable(" ".join(line.split())))
        undone = sum(r.status == "undone" for r in results)
        refused = sum(r.status == "refused" for r in results)
        print(f"batch {printable(args.id.strip())}: {undone} undone, {refused} refused")
    return 3 if any(r.status == "refused" for r in results) else 0
