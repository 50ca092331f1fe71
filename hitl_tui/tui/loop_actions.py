"""The loop behind a block, from the inbox screen: `R` runs its `[[loop]]` restart (also the
restart an answer runs once written), `t` goes to it (its `open` command, else a shell in its
repository, or on the machine it lives on), `x` drops an answer waiting for its loop from the
list. The commands run in workers; `LoopActions` is mixed into the inbox screen, whose
`@on(Restarted)` handler calls `show_restarted`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from hitl_tui.answers.service import restart_for, run_restart
from hitl_tui.inbox.inbox import Delta, Inbox, key_of
from hitl_tui.loops.commands import (
    ControlInValue,
    Loop,
    Ran,
    check_value,
    logs_dir,
    loop_for,
    run_command,
)
from hitl_tui.model import Block
from hitl_tui.textio import printable
from hitl_tui.tui.messages import Host, ListChanged, Refused, Restarted
from hitl_tui.tui.waiting import waiting_of

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


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
        self.host.progress.step(
            block.id, "restart", printable(f"{block.id}: restarting: {restart.command}"), start=True
        )
        self._restart(block, restart.loop)

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
        self._dismiss(block, record)

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
            self._open(block, loop)
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
                self._shell_in(block, repo, argv)
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
        self._shell_in(block, repo)

    def _shell_in(self, block: Block, repo: Path | str, argv: list[str] | None = None) -> None:
        """A shell in the repository ($SHELL, else sh; or `argv`, a shell where it lives on
        another machine), the app suspended until it exits."""
        import subprocess

        from textual.app import SuspendNotSupported

        cwd = repo if argv is None else None
        argv = argv or [os.environ.get("SHELL") or "/bin/sh"]
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


def _failed(block: Block, what: str, ran: Ran) -> str:
    where = f"\noutput: {ran.log}" if ran.log else ""
    return f"{block.id}: {what} failed ({ran.problem}){where}"
