"""`hitl snooze`, `hitl unsnooze`, and the view options of `hitl list` (--filter, --sort, --all).

A snooze is the operator's view only (see `snoozebook`): nothing is written to a repository.
`list` builds the same `view.ViewSpec` the app shows, so the two always agree on what is listed.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from hitl_tui.cli.base import PROG, Parser, open_inbox, resolve
from hitl_tui.inbox.view import ORDERS, ViewSpec
from hitl_tui.model import UsageError

FILTER_HELP = (
    "filter:  words are ANDed, ignoring case, over id, repo, title, question, category,\n"
    "         state and source; repo:shop cat:credentials state:needs_context src:github\n"
    "         id:shop title:ruff narrow to one field; age:>1h age:<15m by how long it has\n"
    "         waited; a leading - or ! excludes (--filter=-cat:credentials, or\n"
    "         --filter '!cat:credentials'); \"two words\" is a phrase.\n"
    f"orders:  {', '.join(ORDERS)} (oldest: longest blocked first, the default)"
)


def add_view_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--filter", metavar="QUERY", default="", help="only blocks that match")
    parser.add_argument("--sort", metavar="ORDER", choices=ORDERS, default="oldest")
    parser.add_argument(
        "--all", action="store_true", help="also list snoozed blocks (`hitl snooze`)"
    )


def view_from_args(args: argparse.Namespace) -> ViewSpec:
    spec = ViewSpec(order=args.sort).with_query(args.filter)
    if spec.query.problems:
        raise UsageError(f"--filter: {spec.query.problems[0]}")
    return spec


# -- snooze ----------------------------------------------------------------------------------


def build_snooze() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} snooze",
        description="Set a block aside without answering it: it leaves the list (and `hitl\n"
        "list`, unless --all) until its time is up or its loop rewrites it. The loop stays\n"
        "blocked, and `hitl guard` still stops it: a snooze is your view only.",
        epilog="examples:\n"
        "  hitl snooze shop --for 1h\n"
        "  hitl snooze shop --until 09:00      (the next 09:00, local time)\n"
        "  hitl snooze shop --until tomorrow   (tomorrow 09:00)\n"
        "  hitl snooze shop --until-change\n\n"
        "exit codes: 0 snoozed, 2 bad usage or no such block.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="block file, repository, or id")
    p.add_argument("paths", nargs="*", metavar="PATH", help="where to look (default: config)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--for", dest="duration", metavar="DURATION", help="15m, 1h, 4h, 2d ...")
    how.add_argument("--until", metavar="TIME", help="a time of day (09:00) or 'tomorrow'")
    how.add_argument("--until-change", action="store_true", help="until its loop rewrites it")
    p.add_argument("--config", metavar="FILE", help="TOML config file")
    p.add_argument("--json", action="store_true", help="print the snooze as JSON")
    return p


def run_snooze(args: argparse.Namespace) -> int:
    from hitl_tui.state.snoozes import SnoozeBook, until_for
    from hitl_tui.textio import printable
    from hitl_tui.timefmt import parse_duration

    now = datetime.now(UTC)
    try:
        if args.duration is not None:
            until = until_for(now, duration=parse_duration(args.duration))
        elif args.until is not None:
            until = until_for(now, clock=args.until)
        else:
            until = None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    block = _block(args)
    snooze = SnoozeBook.for_state().snooze(block, until)
    if args.json:
        import json

        print(json.dumps(snooze.to_json(), ensure_ascii=False))
    elif until is None:
        print(f"{printable(block.id)}: snoozed until it changes")
    else:
        print(f"{printable(block.id)}: snoozed until {until.astimezone():%Y-%m-%d %H:%M}")
    return 0


def build_unsnooze() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} unsnooze",
        description="Bring a snoozed block back into the list now.",
        epilog="exit codes: 0 done (also when it was not snoozed), 2 bad usage or no such block.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="block file, repository, or id")
    p.add_argument("paths", nargs="*", metavar="PATH", help="where to look (default: config)")
    p.add_argument("--config", metavar="FILE", help="TOML config file")
    return p


def run_unsnooze(args: argparse.Namespace) -> int:
    from hitl_tui.state.snoozes import SnoozeBook
    from hitl_tui.textio import printable

    block = _block(args)
    was = SnoozeBook.for_state().unsnooze(block)
    print(f"{printable(block.id)}: " + ("back in the list" if was else "was not snoozed"))
    return 0


def _block(args: argparse.Namespace):
    """The open block TARGET names: a remote one (`owner/name#12`) read afresh, else local."""
    from hitl_tui.config import load_config

    config = load_config(args.config)
    remote = next((r for r in config.remotes if r.owns(args.target)), None)
    if remote is not None:
        return remote.read(args.target)
    _config, inbox = open_inbox(args, config)
    return resolve(args, inbox)[1]
