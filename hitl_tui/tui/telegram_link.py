"""The app runs the `[telegram]` bot (`telegram.bot.Runner`) beside its watcher: started in a
thread once the first scan is done, woken by every change of the inbox, stopped as the app
exits. Its state is the header's like a remote backend's ("telegram 0/1 ok (bot: why)"), a
change of it a toast; what it logs (an update from a foreign chat) is a toast once. Mixed
into the App; nothing here blocks the UI (the bot's calls run in its own threads)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from hitl_tui.model import HitlError
from hitl_tui.textio import printable

if TYPE_CHECKING:
    from hitl_tui.telegram.bot import Runner

TITLE = "telegram"
SCOPE = "bot"


class RunsTelegram:
    """The app's side of the bot (the App provides config, inbox, source_states, notify,
    refresh_header, call_from_thread)."""

    telegram: Runner | None = None

    def start_telegram(self) -> None:
        """Start the bot when the config has `[telegram]` (in a thread: the claim and the
        first look at the inbox never hold the UI)."""
        cfg = self.config.telegram  # type: ignore[attr-defined]
        if cfg is None or self.telegram is not None:
            return
        self._telegram_state("ok", "starting")
        threading.Thread(target=self._telegram_start, name="hitl-telegram", daemon=True).start()

    def _telegram_start(self) -> None:
        from hitl_tui.telegram.bot import start_bot

        app = self
        try:
            runner = start_bot(
                self.config.telegram,  # type: ignore[attr-defined]
                self.inbox,  # type: ignore[attr-defined]
                self.config.loops,  # type: ignore[attr-defined]
                self.operator,  # type: ignore[attr-defined]
                os.environ,
                log=lambda line: app._from_bot(app._telegram_logged, line),
                on_state=lambda state, message: app._from_bot(app._telegram_state, state, message),
            )
        except HitlError as exc:
            self._from_bot(self._telegram_state, "error", str(exc))
            return
        self.telegram = runner
        self._from_bot(self._telegram_state, *runner.state)
        runner.wake()

    def _from_bot(self, call, *args) -> None:
        if not self.is_running:  # type: ignore[attr-defined]
            return  # the app has exited: nothing to show it on
        try:
            self.call_from_thread(call, *args)  # type: ignore[attr-defined]
        except RuntimeError:  # the app has exited meanwhile
            pass

    def _telegram_state(self, state: str, message: str) -> None:
        states = self.source_states.setdefault(TITLE, {})  # type: ignore[attr-defined]
        before = states.get(SCOPE)
        states[SCOPE] = (state, message)
        self.refresh_header()  # type: ignore[attr-defined]
        if state != "ok" and (before is None or before[0] != state):
            self.notify(  # type: ignore[attr-defined]
                printable(message), title="Telegram", severity="warning", markup=False
            )

    def _telegram_logged(self, line: str) -> None:
        seen = self.__dict__.setdefault("_telegram_lines", set())
        if line not in seen and len(seen) < 100:
            seen.add(line)
            self.notify(printable(line), title="Telegram", markup=False)  # type: ignore[attr-defined]

    def wake_telegram(self) -> None:
        if self.telegram is not None:
            self.telegram.wake()

    def stop_telegram(self) -> None:
        if self.telegram is not None:
            self.telegram.stop(wait=0.2)  # the app exits at once; a long poll is left
            self.telegram = None
