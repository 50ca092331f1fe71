"""`hitl guard`'s work, apart from its command line (`hitl_tui.cli.agent`): the blocks open
under a path, and running the agent's command as a shell would (`--then CMD`).

Layer: agent, beside loops and answers; above journal and inbox, below the clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hitl_tui.model import Block, HitlError

if TYPE_CHECKING:
    from hitl_tui.inbox.inbox import Inbox


class CommandError(HitlError):
    """CMD of `guard --then` could not be started: the shell's exit codes, 127 and 126."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def open_blocks(path: Path) -> tuple[Inbox, list[Block]]:
    """The inbox of the repositories under `path` (for its warnings) and its open blocks, in
    the inbox's order."""
    from hitl_tui.inbox.inbox import Inbox

    inbox = Inbox.open([path])
    blocks: list[Block] = inbox.sorted_blocks()
    return inbox, blocks


def run_then(command: list[str]) -> int:
    """Run CMD in the foreground and return its exit code, as a shell would report it.

    hitl only waits: Ctrl+C reaches CMD (same process group) and hitl returns what CMD made of
    it; SIGTERM and SIGHUP sent to hitl are passed on to CMD.
    """
    import signal
    import subprocess

    from hitl_tui.textio import printable

    name = printable(command[0])
    forwarded = (signal.SIGTERM, signal.SIGHUP)
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    def wait_for_cmd(_signum: int, _frame: object) -> None:
        """Ctrl+C already went to CMD from the terminal: sending it again would double it."""

    # Handlers, not SIG_IGN: CMD gets the default dispositions back when it starts.
    previous = {sig: signal.signal(sig, forward) for sig in forwarded}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, wait_for_cmd)
    try:
        try:
            proc = subprocess.Popen(command)
        except FileNotFoundError:
            raise CommandError(f"{name}: command not found", 127) from None
        except OSError as exc:
            raise CommandError(f"{name}: {exc.strerror or type(exc).__name__}", 126) from None
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code
