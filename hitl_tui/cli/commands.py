"""The `hitl` command: the app, and the subcommands scripts and agents use.

`list` and `answer` never import Textual (a test proves it): they are fast, and they work where
no terminal UI can run. Every error a user can cause is one line on stderr and an exit code:
0 done, 1 failure, 2 bad usage or input (nothing written), 3 the block changed or is gone
(nothing written).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hitl_tui import __version__
from hitl_tui.cli import agent as agent_cli
from hitl_tui.cli import batch as batch_cli
from hitl_tui.cli import journal as journal_cli
from hitl_tui.cli import listen as listen_cli
from hitl_tui.cli import loop as loop_cli
from hitl_tui.cli import mcp as mcp_cli
from hitl_tui.cli import note as note_cli
from hitl_tui.cli import serve as serve_cli
from hitl_tui.cli import stats as stats_cli
from hitl_tui.cli import status as status_cli
from hitl_tui.cli import triage as triage_cli
from hitl_tui.cli.base import (
    PROG,
    Parser,
    add_common,
    open_inbox,
    print_warnings,
    repo_paths,
    resolve,
    use_config,
)
from hitl_tui.model import Answer, HitlError, UsageError
from hitl_tui.sources.ssh import wire

if TYPE_CHECKING:
    from hitl_tui.answers.service import Answered
    from hitl_tui.config import Config
    from hitl_tui.loops.commands import Loop
    from hitl_tui.loops.resume import ResumeBook
    from hitl_tui.model import Plan
    from hitl_tui.tui.app import HitlApp

EPILOG = """\
commands:
  hitl [PATH...]          open the inbox (the terminal app) on these repositories
  hitl list [PATH...]     print the open blocks (--json for scripts)
  hitl answer TARGET      answer one block with --choice KEY or --text TEXT
                          (many: ID ID..., --filter QUERY or --similar ID, --option TEXT)
  hitl demo               open the app on a throw-away workspace with sample blocks
  hitl serve [PATH...]    the app in a web browser, on http://127.0.0.1:8000
  hitl listen [PATH...]   the notices and the Telegram bot, with no terminal
  hitl undo [ID]          revert the last answer (or the named one), byte for byte
  hitl history            every answer given, newest first (--json for scripts)
  hitl note ID TEXT       reply and keep it blocked: your note where the loop reads it
  hitl restart ID         run the [[loop]] restart of the block's repository
  hitl status [PATH...]   per repo: open blocks, answers waiting for the loop, resumed,
                          not resumed (exit 4 when an answer did not resume)
  hitl stats [PATH...]    fleet health over --since 30d: blocks opened and answered, time
                          to answer and blocked, undone, asked again, not resumed
  hitl snooze ID --for 1h set a block aside unanswered (--until 09:00, --until-change)
  hitl unsnooze ID        bring a snoozed block back into the list now
  hitl escalate ...       (agents) write BLOCKED.md, notify a human, exit 2
  hitl guard [PATH]       (loop runners) exit 2 while the repository is blocked;
                          --then CMD...: run the agent CLI CMD only while not blocked
  hitl mcp [REPO]         (agents over MCP: Claude Code, Codex, Cursor) the server through
                          which they ask; --print-config claude|codex|cursor
  hitl grants [PATH...]   the "Allow always" answers to permission prompts (--revoke ID)

Each PATH is a repository, or a folder whose sub-folders (to depth 2) are repositories.
With no PATH: the 'repos' of the config file, else the current directory.
Config: --config FILE, else $HITL_CONFIG, else config.toml in the user config folder.

exit codes: 0 ok, 1 failure, 2 bad usage or input, 3 the block changed or is gone,
4 (status) an answer did not resume in time
(escalate exits 2 only when it wrote BLOCKED.md, 1 otherwise; see 'hitl escalate --help').
Run 'hitl COMMAND --help' for a command's options.
"""


def build_parsers() -> dict[str, argparse.ArgumentParser]:
    fmt = argparse.RawDescriptionHelpFormatter
    parsers: dict[str, argparse.ArgumentParser] = {}

    main = Parser(
        prog=PROG,
        description="The operator's inbox for blocked coding-agent loops.",
        epilog=EPILOG,
        formatter_class=fmt,
    )
    add_common(main)
    main.add_argument("--version", action="version", version=f"hitl {__version__}")
    parsers[""] = main

    p = Parser(
        prog=f"{PROG} list",
        description="Print every open block, longest blocked first (snoozed ones with --all).",
        epilog="--json prints one array; each element has id, repo, source, path, state,\n"
        "category, title, question, context, attempted, choices, since, fingerprint,\n"
        "snoozed (true or false), snoozed_until (a time, or null) and asked_again: the\n"
        "answer this block asks again (entry, time, answered), or null: one given in its\n"
        "repo at most 24 h before it began, to a similar question (↻ in the plain list).\n\n"
        + triage_cli.FILTER_HELP
        + "\n\nexamples:\n"
        "  hitl list --filter 'repo:shop ruff' --sort repo\n"
        "  hitl list --json --filter 'cat:credentials age:>1h'\n\n"
        "Each [[remote]] host is asked at once, for list_timeout_seconds at most (5);\n"
        "one that does not answer is one stderr line, and the rest is listed.",
        formatter_class=fmt,
    )
    add_common(p)
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument(
        "--watch",
        action="store_true",
        help="with --json: print the whole list as one line, then one line per change, "
        "until stdin closes (the remote protocol: see 'Many machines' in the README)",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="only the blocks in files: no remote backend of the config (GitHub, [[remote]])",
    )
    p.add_argument("--alive", type=float, default=None, help=argparse.SUPPRESS)
    triage_cli.add_view_options(p)
    parsers["list"] = p

    p = Parser(
        prog=f"{PROG} answer",
        description="Answer one block and write the answer back as its loop expects.",
        epilog="TARGET: a block file, a repository with exactly one open block, or an id\n"
        "from 'hitl list'.\n\n"
        "examples:\n"
        "  hitl answer shop --choice B\n"
        "  hitl answer ~/loops/shop/BLOCKED.md --text 'Keep invoices' --note 'legal asked'\n"
        "  hitl answer shop --choice 2 --dry-run\n"
        "  hitl answer --similar shop --option 'Keep invoices' --dry-run\n\n"
        "exit codes (one block): 0 written, 2 bad usage or input, 3 the block changed or is\n"
        "gone, 1 anything else. Nothing is written unless the exit code is 0.\n\n" + batch_cli.HELP,
        formatter_class=fmt,
    )
    p.add_argument("target", nargs="?", metavar="TARGET", help="block file, repository, or id")
    # One of --choice, --text (and, for many blocks, --option): checked in cmd_answer.
    how = p.add_mutually_exclusive_group()
    how.add_argument("--choice", metavar="KEY", help="a choice's label (B) or position (2)")
    how.add_argument(
        "--text",
        metavar="TEXT",
        action="append",
        help="answer in your own words (repeat once per question where a block asks several)",
    )
    p.add_argument(
        "--option",
        metavar="TEXT",
        help="(many blocks) in each block, the choice whose text reads TEXT",
    )
    p.add_argument("--note", metavar="TEXT", help="a remark added to the decision and the note")
    p.add_argument(
        "--expect",
        metavar="FINGERPRINT",
        help="refuse (exit 3) unless the block still has this fingerprint (from list --json)",
    )
    p.add_argument(
        "--decision",
        metavar="TEXT",
        help="the decision text to write instead of the one hitl words (as edited in a preview)",
    )
    p.add_argument(
        "--operator", metavar="NAME", help="who answers (default: the config's operator)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: with --dry-run the plan (summary, diff, hint, "
        "decision_text), else what was done (done, entry)",
    )
    p.add_argument(
        "--no-restart",
        action="store_true",
        help="do not run the [[loop]] restart of the block's repository after writing",
    )
    p.add_argument(
        "--filter",
        metavar="QUERY",
        help="(many blocks) every block 'hitl list --filter QUERY' lists, in the PATHs",
    )
    p.add_argument(
        "--similar",
        metavar="ID",
        help="(many blocks) ID and every open block asking the same question",
    )
    add_common(p)
    parsers["answer"] = p

    p = Parser(
        prog=f"{PROG} demo",
        description="Open the app on a throw-away workspace of sample repositories. A simulated "
        "agent writes a new BLOCKED.md a few seconds in. Nothing outside the temp folder is "
        "touched: the demo's answers are journaled in a state folder of its own inside it, "
        "never in yours. The folder is removed on exit unless --keep.",
        formatter_class=fmt,
    )
    p.add_argument("--keep", action="store_true", help="keep the temp folder and print its path")
    p.add_argument(
        "--agent-delay",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="when the simulated agent writes its block (default 5; 0: never)",
    )
    parsers["demo"] = p
    for name, (build, _run) in COMMANDS.items():
        if build is not None:
            parsers[name] = build()
    return parsers


def cmd_list(args: argparse.Namespace) -> int:
    from hitl_tui.inbox.parsecache import gc_paused

    # Everything `list` makes lives until it exits: the cyclic collector would only walk it.
    with gc_paused():
        return _list(args)


def _list(args: argparse.Namespace) -> int:
    if args.watch:
        return _watch(args)
    from hitl_tui.inbox.query import category_note
    from hitl_tui.inbox.view import listed
    from hitl_tui.state.snoozes import SnoozeBook
    from hitl_tui.textio import json_encoder, printable
    from hitl_tui.timefmt import age

    spec = triage_cli.view_from_args(args)
    _config, inbox = open_inbox(args)
    for remote in () if args.local else inbox.remotes:
        remote.read_into(inbox, _warn)  # one stderr line per scope it could not read
    print_warnings(inbox)
    snoozes = SnoozeBook.for_state()
    now = datetime.now(UTC)
    blocks = listed(inbox.blocks.values(), spec, snoozes, now)
    if args.all:
        blocks += listed(inbox.blocks.values(), replace(spec, snoozed=True), snoozes, now)
    again = _asked_again(blocks)
    if not args.all:  # on stderr, for --json too: a script's log says what it did not get
        aside = sum(1 for b in inbox.blocks.values() if snoozes.snoozed(b, now))
        if aside:
            print(f"hitl: {aside} snoozed not listed (--all lists them)", file=sys.stderr)
    note = category_note(
        spec.query,
        (b for b in inbox.blocks.values() if args.all or not snoozes.snoozed(b, now)),
        lambda name: getattr(inbox.source_named(name), "category_hint", None),
    )
    if note:  # on stderr, like the snoozed count: `cat:` found none where blocks carry none
        print(f"hitl: {printable(note)}", file=sys.stderr)
    if args.json:
        # One element per line, each through orjson, or json's C encoder for what orjson
        # refuses (a path of undecodable bytes: lone surrogates, written as `\udce9` escapes,
        # never raw bytes), with one encoder for all.
        encode = json_encoder()

        def item(block) -> str:
            data = block.to_json()
            snooze = snoozes.get(block) if snoozes.snoozed(block, now) else None
            data["snoozed"] = snooze is not None
            data["snoozed_until"] = snooze.until.isoformat() if snooze and snooze.until else None
            earlier = again(block)
            data["asked_again"] = None if earlier is None else earlier.to_json()
            return encode(data)

        items = ",\n".join(item(b) for b in blocks)
        sys.stdout.write(f"[\n{items}\n]\n" if blocks else "[]\n")
        return 0
    if not blocks:
        count = len(inbox.workspace.repos)
        what = "no open blocks" if not inbox.blocks else "no blocks match"
        print(f"{what} in {count} repo{'' if count == 1 else 's'}")
        return 0
    width = max(len(printable(b.id)) for b in blocks)
    for b in blocks:
        state = "" if b.state == "blocked" else f"[{b.state}] "
        if b.notes:  # replied to and kept blocked (`hitl note`): it waits on the operator
            state += "[waiting on you] "
        if args.all and snoozes.snoozed(b, now):
            state = "[snoozed] " + state
        if again(b) is not None:
            state = "↻ asked again: " + state
        question = printable(b.one_line_question())
        if b.notes:
            question += printable(f" — your note: {b.notes[-1]}")
        print(f"{printable(b.id):<{width}}  {age(b.since):>4}  {state}{question}")
    return 0


def _asked_again(blocks: list) -> Callable:
    """block -> the earlier answer it asks again (`similar`), or None, from the memory of the
    recent answers (`hitl answer`, `hitl undo` and the app keep it): no journal record is read,
    so `list` starts as fast with 100,000 answers journaled as with none."""
    from hitl_tui.loops.similarity import recent_index

    index = recent_index() if blocks else None
    if index is None or not len(index):
        return lambda block: None
    return index.asked_again


def _watch(args: argparse.Namespace) -> int:
    from hitl_tui.cli.watch import run_watch

    if not args.json:
        raise UsageError("--watch needs --json (it prints JSON lines)")
    if args.filter or args.sort != "oldest" or args.all:
        raise UsageError("--watch lists every open block: --filter, --sort and --all do not apply")
    alive = wire.ALIVE_EVERY if args.alive is None else args.alive
    if not 0.05 <= alive <= 3600:
        raise UsageError("--alive must be between 0.05 and 3600 seconds")
    _config, inbox = open_inbox(args)
    # The stream's warnings are its repositories' (a host's, to the app that reads it): the
    # [[loop]]s of this machine's config are not what its blocks warn of.
    inbox.config_warnings = []
    return run_watch(inbox, alive)


def _warn(text: str) -> None:
    print(f"hitl: {_one_line(text)}", file=sys.stderr)


def cmd_answer(args: argparse.Namespace) -> int:
    from hitl_tui.answers.service import from_the_file, plan_answer, source_for, write_answer
    from hitl_tui.config import load_config
    from hitl_tui.model import StaleError

    batch_cli.check_how(args)
    if batch_cli.wants_batch(args):
        return batch_cli.run_answer(args)
    if args.target is None:
        raise UsageError("the following arguments are required: TARGET (see 'hitl answer --help')")
    config = load_config(args.config)
    remote = next((r for r in config.remotes if r.owns(args.target)), None)
    if remote is not None:  # `owner/name#12`: read afresh, answered over its API
        from hitl_tui.answers.service import check_own_words, send_answer
        from hitl_tui.loops.resume import ResumeBook

        block = remote.read(args.target)
        answer = answer_from_args(args, block, config.operator_name())
        check_own_words(answer)
        plan = remote.plan(block, answer)
        book = ResumeBook.for_state(sources=config.remotes)
        code = finish_answer(
            args,
            plan,
            lambda plan: send_answer(remote, plan, book, config.loops),
            config.loops,
            book=book,
        )
        _remember(args)
        return code
    config, inbox = open_inbox(args, config)
    try:
        inbox, block = resolve(args, inbox)
    except UsageError:
        if batch_cli.may_be_ids(args):  # `hitl answer shop store --text ...`: two blocks
            return batch_cli.run_answer(args)
        if not args.expect or any(b.fingerprint == args.expect for b in inbox.blocks.values()):
            raise
        # The script read this block with `list`; no block has those bytes now: it is gone.
        raise StaleError(
            f"{args.target}: no open block has {args.expect[:19]}… any more (answered or changed)"
        ) from None
    # The file decides, never a parse-cache entry that disagrees with it (dropped here).
    block = from_the_file(inbox, block)
    answer = answer_from_args(args, block, config.operator_name())
    plan = plan_answer(inbox, block, answer)
    editable = None
    if args.json and args.dry_run:  # what a preview lets the operator edit
        try:
            editable = source_for(inbox, block).decision_text(block, answer)
        except HitlError:
            editable = None
    code = finish_answer(
        args,
        plan,
        lambda plan: write_answer(inbox, plan, replan=True),
        config.loops,
        editable,
        inbox.resumes,
    )
    if not args.dry_run:
        # The answered block leaves the since memory: a block the loop writes at the same path
        # next is a new one (its age, and whether it asks again what was just answered).
        inbox.handle([block.path])
        inbox.save_cache()
    _remember(args)
    return code


def _remember(args: argparse.Namespace) -> None:
    """After an answer: the memory of the recent answers (`hitl list`'s asked_again)."""
    from hitl_tui.loops.similarity import remember_recent

    if not args.dry_run:
        remember_recent(datetime.now(UTC))


def answer_from_args(args: argparse.Namespace, block, operator: str) -> Answer:
    """The Answer `hitl answer` asks for, checked against the block it names."""
    from hitl_tui.model import StaleError

    if args.expect and args.expect != block.fingerprint:
        raise StaleError(f"{block.id}: the block changed since {args.expect[:19]}…")
    texts = tuple(args.text or ())
    if args.text is not None and not any(t.strip() for t in texts):
        raise UsageError("--text is empty")
    choice = block.find_choice(args.choice) if args.choice is not None else None
    decision = getattr(args, "decision", None)
    if decision is not None and not decision.strip():
        raise UsageError("--decision is empty")
    named = getattr(args, "operator", None)
    if named is not None and not named.strip():
        raise UsageError("--operator is empty")
    return Answer(
        choice=choice,
        texts=texts,
        note=args.note,
        operator=named.strip() if named else operator,
        decision_override=decision,
    )


def finish_answer(
    args: argparse.Namespace,
    plan: Plan,
    write: Callable[[Plan], Answered],
    loops: tuple[Loop, ...] = (),
    editable: str | None = None,
    book: ResumeBook | None = None,
) -> int:
    """Print the diff (--dry-run), or write the plan (`write`: the answer service's), say what
    was done, and restart the loop (`[[loop]]`, unless --no-restart: `service.restart_after`,
    its failure kept in `book`). The exit code is the answer's, not the restart's."""
    from hitl_tui.answers.service import restart_after, restart_for
    from hitl_tui.textio import printable

    skip = getattr(args, "no_restart", False)
    as_json = getattr(args, "json", False)
    if args.dry_run:
        restart = None if skip else restart_for(loops, plan.block)
        then = restart.command if restart is not None else None
        if as_json:
            _print_json(wire.plan_json(plan, editable, then))
            return 0
        sys.stdout.write(printable(plan.diff(), keep_newlines=True))
        if then is not None:
            print(printable(f"hitl: then runs: {then}"), file=sys.stderr)
        if restart is not None and restart.refused is not None:
            print(f"hitl: {restart.refused}", file=sys.stderr)
        return 0
    answered = write(plan)
    if as_json:
        answered = restart_after(answered, loops, book, skip)
        # Only the object on stdout: what the restart says goes to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            loop_cli.say_restarted(answered)
        done = wire.done_json(answered.plan, answered.done, answered.entry, answered.restarted)
        _print_json(done)
        return 0
    print(f"{printable(answered.plan.block.id)}: " + "; ".join(answered.done))
    answered = restart_after(answered, loops, book, skip)
    loop_cli.say_restarted(answered)
    if answered.hint:
        print(printable(answered.hint))
    return 0


def _print_json(data: dict) -> None:
    from hitl_tui.textio import json_encoder

    sys.stdout.write(json_encoder()(data) + "\n")


def cmd_demo(args: argparse.Namespace) -> int:
    from hitl_tui.cli.demo import run_demo

    return run_demo(keep=args.keep, agent_delay=args.agent_delay, notices=args.recovered)


def cmd_app(args: argparse.Namespace) -> int:
    from hitl_tui.config import load_config

    config = load_config(args.config)
    use_config(config)
    app = open_app(repo_paths(args, config), config, notices=args.recovered)
    try:
        app.run()
    finally:
        app.inbox.save_cache()
    return app.return_code or 0


def open_app(paths: list[Path], config: Config, **options: Any) -> HitlApp:
    """The app of `paths` as `hitl` opens it (`options`: HitlApp's). Only the PATHs are
    checked here (UsageError before the screen): the workspace search and the parse cache's
    load wait behind the app's first frame (`Inbox.deferred`: its first scan does them)."""
    import threading

    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.loops.resume import ResumeBook

    inbox = Inbox.deferred(paths)
    # Begun now, while Textual loads: the search is mostly system calls (another core's
    # time); the app's first scan finds it done, or waits for it (`prepare` holds the inbox).
    # (What fails there is done again by the scan, and said if it fails again.)
    threading.Thread(target=_quietly(inbox.prepare), name="hitl-prepare", daemon=True).start()
    inbox.use_resumes(ResumeBook.for_state(), config.loops)
    from hitl_tui.tui.app import HitlApp

    return HitlApp(inbox, config=config, **options)


def _quietly(run: Callable[[], object]) -> Callable[[], None]:
    def quietly() -> None:
        with contextlib.suppress(Exception):
            run()

    return quietly


#: Commands that open the app, which shows recovery messages itself.
APP_COMMANDS = ("", "demo")

Build = Callable[[], argparse.ArgumentParser] | None
Run = Callable[[argparse.Namespace], int]

#: Every subcommand: name -> (its parser, None for one built above; what runs it). The one
#: table of commands: `hitl --help` and dispatch both read it (a test checks each is listed).
COMMANDS: dict[str, tuple[Build, Run]] = {
    "list": (None, cmd_list),
    "answer": (None, cmd_answer),
    "demo": (None, cmd_demo),
    "undo": (journal_cli.build_undo, journal_cli.run_undo),
    "history": (journal_cli.build_history, journal_cli.run_history),
    "restart": (loop_cli.build_restart, loop_cli.run_restart),
    "note": (note_cli.build_note, note_cli.run_note),
    "status": (status_cli.build_status, status_cli.run_status),
    "stats": (stats_cli.build_stats, stats_cli.run_stats),
    "snooze": (triage_cli.build_snooze, triage_cli.run_snooze),
    "unsnooze": (triage_cli.build_unsnooze, triage_cli.run_unsnooze),
    "escalate": (agent_cli.build_escalate, agent_cli.run_escalate),
    "guard": (agent_cli.build_guard, agent_cli.run_guard),
    "serve": (serve_cli.build_serve, serve_cli.run_serve),
    "listen": (listen_cli.build_listen, listen_cli.run_listen),
    "mcp": (mcp_cli.build_mcp, mcp_cli.run_mcp),
    "grants": (mcp_cli.build_grants, mcp_cli.run_grants),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    serve_cli.end_with_server()  # a `hitl serve` session: first, before any lock is taken
    if argv[:1] == [wire.ARGV]:  # another machine's hitl, over ssh: the words, byte for byte
        try:
            argv = wire.decode_argv(argv[1:])
        except wire.WireError as exc:
            print(f"hitl: {exc}", file=sys.stderr)
            return 2
    if argv[:1] == [wire.SHELL_IN]:
        return _shell_in(argv[1:])
    debug = bool(os.environ.get("HITL_DEBUG"))
    from hitl_tui.journal import retention
    from hitl_tui.journal import store as journalstore

    journalstore.reset()  # a command reports the malformed records it read itself
    # Until the command reads its config (`--config` is not parsed yet at recovery), the
    # journal keeps what the default config file says.
    retention.reset()
    # The demo touches nothing outside its temp folder, so it leaves the operator's journal
    # (and any answer a crash interrupted) to the next real command.
    recovered = [] if argv[:1] == ["demo"] else _recover(debug)
    try:
        parsers = build_parsers()
        name = argv[0] if argv and argv[0] in parsers and argv[0] else ""
        parser = parsers[name]
        args = parser.parse_intermixed_args(argv[1:] if name else argv)
        # The app shows these as toasts (stderr would vanish behind its screen).
        args.recovered = recovered
        if name not in APP_COMMANDS:
            for message in recovered:
                print(f"hitl: {_one_line(message)}", file=sys.stderr)
        _check_state(name, args)
        run = COMMANDS[name][1] if name else cmd_app
        return run(args)
    except HitlError as exc:
        print(f"hitl: {_one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hitl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: still one line, unless HITL_DEBUG asks for the trace
        if debug:
            raise
        print(f"hitl: internal error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    finally:
        _report_skipped()
        retention.reset()  # the next command (a test, in this process) reads its own config


def _shell_in(words: list[str]) -> int:
    """`t` on another machine's block: `hitl --shell-in REPO` (sent encoded) enters REPO and
    execs the login shell ($SHELL, else the account's, else /bin/sh) with -l, so no far shell
    ever parses the path."""
    import pwd

    from hitl_tui.textio import printable

    if len(words) != 1 or not words[0]:
        print(f"hitl: {wire.SHELL_IN} takes one folder", file=sys.stderr)
        return 2
    try:
        os.chdir(words[0])
    except OSError as exc:
        print(f"hitl: cannot enter {printable(words[0])}: {exc.strerror}", file=sys.stderr)
        return 1
    shell = os.environ.get("SHELL") or ""
    if not shell:
        with contextlib.suppress(KeyError):
            shell = pwd.getpwuid(os.getuid()).pw_shell
    shell = shell or "/bin/sh"
    try:
        os.execv(shell, [shell, "-l"])
    except OSError as exc:
        print(f"hitl: cannot run the shell {printable(shell)}: {exc.strerror}", file=sys.stderr)
        return 1


def _report_skipped() -> None:
    """One line for the malformed journal records this command skipped (see journalstore)."""
    from hitl_tui.journal import store as journalstore

    report = journalstore.skipped_report()
    if report:
        print(f"hitl: {_one_line(report)}", file=sys.stderr)


#: Commands that journal or lock in the state folder (answer unless --dry-run), and ones that
#: only read it; `escalate` and `guard` (the agent's side) work without one, and `demo` uses
#: one of its own in its temp folder.
STATE_WRITERS = ("", "answer", "undo", "listen")
STATE_READERS = ("history", "stats")


def _check_state(name: str, args: argparse.Namespace) -> None:
    """Refuse, in one line and before anything is written, a state folder that cannot be used."""
    from hitl_tui.paths import check_state_dir

    if name in STATE_WRITERS and not getattr(args, "dry_run", False):
        check_state_dir(write=True)
    elif name in STATE_READERS:
        check_state_dir(write=False)


def _recover(debug: bool) -> list[str]:
    """Finish or roll back answers a crash interrupted, before any command; one line each."""
    try:
        from hitl_tui.journal import recover

        return recover()
    except Exception as exc:
        if debug:
            raise
        return [f"could not check the journal: {type(exc).__name__}: {exc}"]


def _one_line(text: str) -> str:
    from hitl_tui.textio import printable

    return printable(" ".join(text.split()))
