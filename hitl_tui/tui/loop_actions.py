"""The loop behind a block, from the inbox screen: `R` runs its `[[loop]]` restart (also the
restart an answer runs once written), `t` goes to it (its `open` command, else a shell in its
repository, or on the machine it lives on), `x` drops an answer waiting for its loop from the
list. Each asks first (`ConfirmAct`, the focus on Cancel: Enter cancels), naming the command
it runs, the shell and where, or the row it drops; `y` does it. What cannot run (no
`[[loop]]`, a refused value, no folder, a browser's page) is said at once, not asked. The
commands run in workers; `LoopActions` is mixed into the inbox screen, whose
`@on(Restarted)` handler calls `show_restarted`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from hitl_tui.answers.service import restart_for, run_restart
from hitl_tui.inbox.inbox import Delta, Inbox, key_of
from hitl_tui.loops.commands import (
    ControlInValue,
    Loop,
    Ran,
    check_value,
    fill,
    logs_dir,
    loop_for,
    run_command,
    shown,
    values_for,
)
from hitl_tui.model import Block
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.messages import Host, ListChanged, Refused, Restarted
from hitl_tui.tui.waiting import waiting_of

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


class ConfirmAct(ModalScreen[bool]):
    """Asked before `t`, `R` or `x` acts: the question names what runs (the command, the
    shell and where) or what is dropped; `y` does it, `n` or `Esc` does nothing. The focus
    starts on Cancel, so an Enter (or a word typed by mistake) never runs anything."""

    DEFAULT_CSS = """
    ConfirmAct { align: center middle; background: $background 60%; }
    #act-box {
        width: 80; max-width: 100%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    #act-question { height: auto; margin-bottom: 1; }
    #act-hint { color: $text-muted; height: 1; }
    #act-buttons { height: auto; align-horizontal: right; }
    #act-buttons Button { margin-left: 2; }
    ConfirmAct.-short #act-question { margin-bottom: 0; }
    ConfirmAct.-short #act-buttons Button, ConfirmAct.-narrow #act-buttons Button {
        height: 1; min-width: 0; border: none; margin-left: 1;
    }
    """
    BINDINGS: ClassVar = bindings("act")

    def __init__(self, title: str, text: str, verb: str) -> None:
        super().__init__()
        self.title_text = title
        #: The question: agent and config text, shown as plain text (never markup).
        self.text = text
        #: What `y` does, in a word ("Restart", "Open", "Drop").
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="act-box") as box:
            box.border_title = self.title_text
            yield Static(Content(printable(self.text, keep_newlines=True)), id="act-question")
            yield Static(f"y {self.verb.lower()} · n/Esc cancel", id="act-hint", markup=False)
            with Horizontal(id="act-buttons"):
                yield Button("Cancel (Esc)", id="keep", variant="primary")
                yield Button(f"{self.verb} (y)", id="yes", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#keep")
    def action_keep(self) -> None:
        self.dismiss(False)


class LoopActions(_Screen):
    """`R`, `t`, `x`, and the restart after an answer, for the inbox screen (mixed into it)."""

    inbox: Inbox
    loops: tuple[Loop, ...]

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def host(self) -> Host: ...

        def _current(self) -> Block | None: ...

    def action_restart_loop(self) -> None:
        block = self._current()
        if block is None:
            return
        restart = restart_for(self.loops, block)
        if restart is None:
            self.notify(
                printable(
                    f"No [[loop]] restart covers {block.repo_name}: see the README, "
                    "Restarting loops."
                ),
                severity="warning",
                markup=False,
            )
            return
        if restart.refused is not None:
            self.post_message(Refused("Loop", restart.refused))
            return
        loop = restart.loop

        def restart_now() -> None:
            self.host.progress.step(
                block.id,
                "restart",
                printable(f"{block.id}: restarting: {restart.command}"),
                start=True,
            )
            self._restart(block, loop)

        again = (
            "\nIts answer's row waits for the loop anew." if waiting_of(block) is not None else ""
        )
        self._ask_first(
            "Restart the loop?",
            f"Run the [[loop]] restart for {block.id}?\n  {restart.command}\n"
            f"in {block.repo_name}{again}",
            "Restart",
            restart_now,
        )

    def _ask_first(self, title: str, text: str, verb: str, then: Callable[[], object]) -> None:
        """`ConfirmAct` with `text`; `then` runs on its `y` only."""

        def chosen(yes: bool | None) -> None:
            if yes:
                then()

        self.app.push_screen(ConfirmAct(title, text, verb), chosen)

    def action_dismiss_waiting(self) -> None:
        block = self._current()
        if block is None:
            return
        record = waiting_of(block)
        if record is None:
            self.notify(
                "x drops an answer waiting for its loop; this is an open block (z snoozes it).",
                severity="warning",
                markup=False,
            )
            return
        self._ask_first(
            "Drop the row?",
            f"Drop the row of the answer to {block.id} from the list?\n"
            f"answered: {record.answered}\n"
            "The answer stays written and in the history (h); hitl stops waiting for its loop.",
            "Drop",
            lambda: self._dismiss(block, record),
        )

    @work(thread=True, group="look", exit_on_error=False, description="_dismiss")
    def _dismiss(self, block: Block, record) -> None:
        if self.inbox.resumes is not None:
            self.inbox.resumes.dismiss(record.id)
        self.post_message(ListChanged(Delta(removed=[key_of(block)])))

    def action_open_loop(self) -> None:
        block = self._current()
        if block is None:
            return
        loop = loop_for(self.loops, block)
        if loop is not None and loop.open is not None:
            try:
                command = shown(fill(loop.open, values_for(block)))
            except ControlInValue as exc:
                self.post_message(Refused("Loop", exc.line("open")))
                return
            self._ask_first(
                "Go to the loop?",
                f"Run the [[loop]] open command for {block.id}?\n  {command}\nin {block.repo_name}",
                "Run",
                lambda: self._open(block, loop),
            )
            return
        repo = block.repo
        if not isinstance(repo, Path) or not repo.is_dir():
            source = self.inbox.source_named(block.source)
            argv = source.shell_argv(block) if source is not None else None
            if argv is not None:  # another machine's repository: a shell there
                # The far repository goes into its command (encoded, so no shell there reads
                # it), and the far shell starts in it: refused like a local {repo}.
                far = block.meta.get("remote_repo")
                try:
                    check_value("{repo}", far if isinstance(far, str) else "")
                    for arg in argv:
                        check_value("the far shell's command", arg)
                except ControlInValue as exc:
                    self.post_message(Refused("Loop", exc.line("t")))
                    return
                self._ask_shell(block, repo, argv)
                return
            self.notify(
                printable(f"{block.id}: no folder on this machine to open a shell in: {repo}"),
                severity="warning",
                markup=False,
            )
            return
        try:  # the shell starts there, and its prompt shows the folder's name as it is
            check_value("{repo}", str(repo))
        except ControlInValue as exc:
            self.post_message(Refused("Loop", exc.line("t")))
            return
        self._ask_shell(block, repo)

    def _ask_shell(self, block: Block, repo: Path | str, argv: list[str] | None = None) -> None:
        """Asked first: the shell (its command) and where it starts; in a browser's page
        (`hitl serve`) there is none to ask about: said at once."""
        if self.app.is_web:
            self._shell_in(block, repo, argv)
            return
        if argv is None:
            what = f"Open a shell in {repo} for {block.id}?\n  {_shell()}"
        else:
            what = f"Open a shell where {block.id} lives ({repo})?\n  {shown(argv)}"
        self._ask_first(
            "Open a shell?",
            f"{what}\nhitl waits until you exit it.",
            "Open",
            lambda: self._shell_in(block, repo, argv),
        )

    def _shell_in(self, block: Block, repo: Path | str, argv: list[str] | None = None) -> None:
        """A shell in the repository ($SHELL, else sh; or `argv`, a shell where it lives on
        another machine), the app suspended until it exits."""
        import subprocess

        from textual.app import SuspendNotSupported

        cwd = repo if argv is None else None
        argv = argv or [_shell()]
        if self.app.is_web:  # `hitl serve`: the page's terminal is the app's, not a shell's
            self.notify(
                printable(
                    f"{block.id}: a shell needs a terminal, and the browser has none here: "
                    f"open one in {repo} yourself (or give the repo a [[loop]] open command)"
                ),
                severity="warning",
                markup=False,
            )
            return
        try:
            try:
                with self.app.suspend():
                    print(printable(f"hitl: a shell in {repo} for {block.id}; exit to come back"))
                    subprocess.run(argv, cwd=cwd, check=False)
            except SuspendNotSupported:
                # No terminal to hand over (headless, as under run_test): run it all the same.
                subprocess.run(
                    argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, check=False
                )
        except OSError as exc:
            self.notify(
                printable(f"Could not start {argv[0]}: {exc.strerror or exc}"),
                severity="error",
                markup=False,
            )

    @work(thread=True, group="open", exit_on_error=False, description="_open")
    def _open(self, block: Block, loop: Loop) -> None:
        assert loop.open is not None
        ran = run_command("open", loop.open, block, loop.timeout, logs_dir())
        if ran.refused:
            self.post_message(Refused("Loop", ran.problem or "open refused"))
        elif not ran.ok:
            self.post_message(Refused("Loop", _failed(block, "open", ran)))

    @work(thread=True, group="restart", exit_on_error=False, description="_restart")
    def _restart(self, block: Block, loop: Loop, record_id: str | None = None) -> None:
        """Run the restart for `block` (a block, or an answer's row); the answer waiting for
        the loop (the row's, or `record_id`) waits anew, or is *restart failed*."""
        record = waiting_of(block)
        rid = record.id if record is not None else record_id
        ran, again = run_restart(
            block, loop, self.inbox.resumes, rid, waits_again=record is not None
        )
        self.post_message(Restarted(block, ran, again))

    def show_restarted(self, message: Restarted) -> None:
        """How the restart went (a toast), the answer's row waiting anew or *restart failed*."""
        ran, block = message.ran, message.block
        if message.waiting is not None:  # waiting anew, or restart failed
            self.host.apply_delta(Delta(waiting=[message.waiting]))
        if ran.refused:
            self.post_message(Refused("Loop", ran.problem or "restart refused"))
            return
        progress = self.host.progress
        if ran.ok:  # the line of the answer's toast (or R's) that said "restarting"
            progress.step(block.id, "restart", printable(f"{block.id}: restarted"))
            return
        progress.step(
            block.id,
            "restart",
            printable(_failed(block, "restart", ran), keep_newlines=True),
            severity="error",
            timeout=12,
        )


def _shell() -> str:
    """The shell `t` opens in a repository: $SHELL, else sh."""
    return os.environ.get("SHELL") or "/bin/sh"


def _failed(block: Block, what: str, ran: Ran) -> str:
    where = f"\noutput: {ran.log}" if ran.log else ""
    return f"{block.id}: {what} failed ({ran.problem}){where}"
