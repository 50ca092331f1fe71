"""`w` in the inbox: reply to a block and keep it blocked ("I add the secret to CI, you wait
for me"). The note is typed in a text box (as own words are), shown as a diff in the preview,
and written in a worker by the answer service (`plan_note`, `write_note`): journaled, so `u`
undoes it; the block stays listed, and no `[[loop]]` restart runs.
"""

from __future__ import annotations

from typing import Any

from hitl_tui.answers.service import plan_note, source_for, write_note
from hitl_tui.model import Block, HitlError, Plan, StaleError
from hitl_tui.textio import printable
from hitl_tui.tui.screens import Preview, PreviewScreen, TextAnswerScreen, Typed

#: The inbox screen (`inbox_screen.InboxScreen`, which imports this module when `w` is pressed:
#: named here only as what the flow reads of it, so no import goes back up).
InboxScreen = Any


def ask_note(screen: InboxScreen, block: Block) -> None:
    """The note's text box; Continue goes to its preview."""
    title = f"{block.id}: reply and keep it blocked — your note (the loop reads it; no restart)"

    def done(typed: Typed | None) -> None:
        if typed is not None and typed.go:
            preview_note(screen, block, " ".join(typed.texts))

    box = TextAnswerScreen(block, [block.one_line_question(400)], [""], title)
    screen.app.push_screen(box, done)


def preview_note(screen: InboxScreen, block: Block, note: str) -> None:
    """The note's plan as a diff (the answers' preview screen); written once confirmed."""
    try:
        plan = plan_note(screen.inbox, block, note, screen.operator, screen.clock())
    except StaleError as exc:
        screen._stale(block, str(exc))
        return
    except HitlError as exc:
        screen.notify(printable(str(exc)), severity="error", markup=False, timeout=8)
        return
    preview = Preview(plan, f"Note on {block.id}, kept blocked")
    if screen._preview_screen is None:
        screen._preview_screen = PreviewScreen(preview)
        screen.app.install_screen(screen._preview_screen, "preview")
    else:
        screen._preview_screen.load(preview)

    def confirmed(plan: Plan | None) -> None:
        if plan is not None:
            screen.run_worker(
                lambda: _write(screen, plan),
                thread=True,
                group="apply",
                exit_on_error=False,
                description="_write_note",
            )

    screen.app.push_screen("preview", confirmed)


def _write(screen: InboxScreen, plan: Plan) -> None:
    """In a worker: write the note, re-read the block (still open), say what was done."""
    block = plan.block
    try:
        written = write_note(screen.inbox, plan)
    except StaleError as exc:
        screen.app.call_from_thread(screen._stale, block, str(exc))
        return
    except HitlError as exc:
        screen.app.call_from_thread(
            screen.notify, printable(str(exc)), severity="error", markup=False, timeout=10
        )
        return
    source = source_for(screen.inbox, block)
    if source.remote:
        source.refresh_soon()
        delta = None
    else:
        delta = screen.inbox.handle([block.path])
    text = f"{block.id}: " + "; ".join(written.done)
    if plan.hint:
        text += f"\n{plan.hint}"

    def show() -> None:
        if delta is not None:
            screen.host.apply_delta(delta)
        screen.notify(printable(text, keep_newlines=True), title="Noted", markup=False)

    screen.app.call_from_thread(show)
