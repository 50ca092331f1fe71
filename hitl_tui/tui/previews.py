"""The answer's preview screen, for the inbox screen (mixed into it): a remote block's plan
read in a worker, the one PreviewScreen loaded with each plan (its restart named), and built
ahead while the app is idle so the first preview of a session opens at once.

Layer: tui.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual import work
from textual.css.query import NoMatches

from hitl_tui.answers.service import restart_for
from hitl_tui.model import Answer, Block, HitlError, StaleError
from hitl_tui.textio import printable
from hitl_tui.tui.answer_flow import preview_of
from hitl_tui.tui.screens import PreviewScreen
from hitl_tui.tui.waiting import waiting_of

if TYPE_CHECKING:
    _Base = Any
else:
    _Base = object


class Previews(_Base):
    """The preview part of the inbox screen (`InboxScreen` provides inbox, loops, rows,
    current, _answer, _stale, _confirmed and _preview_screen)."""

    _preview_screen: PreviewScreen | None

    @work(thread=True, group="preview", exit_on_error=False, description="_remote_preview")
    def _remote_preview(self, block: Block, answer: Answer) -> None:
        try:
            preview = preview_of(self.inbox, block, answer)
        except StaleError as exc:
            self.app.call_from_thread(self._stale, block, str(exc))
            return
        except HitlError as exc:
            self.app.call_from_thread(
                self.notify, printable(str(exc)), severity="error", markup=False, timeout=8
            )
            return
        self.app.call_from_thread(self._show_preview, block, preview)

    def _show_preview(self, block: Block, preview) -> None:
        if len(self.app.screen_stack) > 1:  # the operator went elsewhere meanwhile
            return
        restart = restart_for(self.loops, block)
        if restart is not None:
            preview = replace(preview, restart=restart.command, restart_refused=restart.refused)
        if self._preview_screen is None:
            self._preview_screen = PreviewScreen(preview)
            self.app.install_screen(self._preview_screen, "preview")
        else:
            self._preview_screen.load(preview)
        self.app.push_screen("preview", self._confirmed)

    def prepare_preview(self) -> None:
        """Build the preview screen while the app is idle (after the first scan), so that the
        first preview of a session loads a plan into a mounted screen instead of composing one:
        from the first choice of the highlighted block, or of the first rows (read in a
        thread). Nothing to build it from (no block with a plain first choice among them): the
        first preview builds it."""
        if self._preview_screen is not None:
            return
        try:
            current = self.current
        except NoMatches:  # the timer fired as the app was closing
            return
        blocks = self.rows.blocks
        candidates = ([current] if current is not None else []) + [
            blocks[rk] for rk in self.rows.order[:200]
        ]
        for block in candidates:
            if waiting_of(block) is None and block.choices and not block.choices[0].needs_text:
                self._build_preview(block, self._answer(block.choices[0]))
                return

    @work(thread=True, group="preview", exit_on_error=False, description="_build_preview")
    def _build_preview(self, block: Block, answer: Answer) -> None:
        try:
            preview = preview_of(self.inbox, block, answer)
        except HitlError:  # the block changed or left: the first preview builds the screen
            return
        self.app.call_from_thread(self._install_preview, preview)

    def _install_preview(self, preview) -> None:
        if self._preview_screen is not None or not self.is_attached:
            return
        self._preview_screen = PreviewScreen(preview)
        self.app.install_screen(self._preview_screen, "preview")
        # Composed and mounted now, off screen (Textual mounts an installed screen when it is
        # first asked for; `_get_screen` is that step, without showing it).
        try:
            self.app._get_screen("preview")
        except Exception:  # a Textual without it: the first push composes it, as before
            pass
