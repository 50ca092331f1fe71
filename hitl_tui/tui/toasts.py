"""Toasts that inform without burying the screen.

One answer is one toast that changes as the answer goes on (`ProgressToasts`): *answered*,
then *restarted* (or the restart's failure), then *resumed (new commit abc1234)*, always in
that order, whatever order the restart's exit and the loop's first sign arrive in. Each
change replaces the toast (a new timeout), never stacks another over the panes.

`show` posts a toast and widens it when one of its words (a log's path, a URL) would be cut
across lines at Textual's width: the path then stands whole on a line of its own, copied from
the terminal in one piece.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from textual.notifications import Notification, Notify

if TYPE_CHECKING:
    from textual.app import App

#: Textual's toast width, and the columns its border and padding take.
DEFAULT = 60
PADDING = 4

Severity = Literal["information", "warning", "error"]
_RANK = {"information": 0, "warning": 1, "error": 2}

#: The steps of an answer, in the order its toast lists them.
STEPS = ("answered", "restart", "resumed")


def fit_width(message: str, screen_width: int) -> int | None:
    """The width a toast needs so that no word of `message` (a log's path, a URL) is cut
    across lines: None when Textual's own width (`DEFAULT`) holds every word, else the
    longest word plus the toast's padding, at most the screen's width."""
    longest = max((len(w) for w in message.split()), default=0)
    if longest + PADDING <= DEFAULT:
        return None
    return min(longest + PADDING, screen_width)


def show(app: App, notification: Notification) -> None:
    """Post `notification`, then widen its toast if one of its words would be cut."""
    app.post_message(Notify(notification))
    if fit_width(str(notification.message), 10_000) is not None:
        app.call_after_refresh(_fit, app, notification)


def _fit(app: App, notification: Notification) -> None:
    from textual.widgets._toast import Toast

    try:
        toasts = list(app.screen.query(Toast))
    except Exception:  # no screen (closing)
        return
    for toast in toasts:
        if getattr(toast, "_notification", None) is notification:
            width = fit_width(str(notification.message), app.size.width)
            if width is not None:
                toast.styles.max_width = "100%"
                toast.styles.width = width


@dataclass
class _Story:
    steps: dict[str, str] = field(default_factory=dict)
    severity: Severity = "information"
    shown: Notification | None = None


class ProgressToasts:
    """The one toast of each answer (keyed by its block's id), updated step by step."""

    #: Stories kept at most (the oldest forgotten first): a day's answers, not a leak.
    KEEP = 64

    def __init__(self, app: App) -> None:
        self.app = app
        self._stories: dict[str, _Story] = {}

    def step(
        self,
        key: str,
        step: str,
        text: str,
        *,
        severity: Severity = "information",
        timeout: float | None = None,
        start: bool = False,
    ) -> None:
        """Set `step` of `key`'s story to `text` and show the story as one toast (replacing the
        one shown). `start` begins a new story (a new answer of the same block)."""
        story = self._stories.pop(key, None)
        if story is None or start:
            if story is not None:
                self._hide(story)
            story = _Story()
        self._stories[key] = story
        while len(self._stories) > self.KEEP:
            self._stories.pop(next(iter(self._stories)))
        story.steps[step] = text
        if _RANK[severity] > _RANK[story.severity]:
            story.severity = severity
        body = "\n".join(story.steps[s] for s in STEPS if s in story.steps)
        title = "Answered" if "answered" in story.steps else "Loop"
        self._hide(story)
        notification = Notification(
            body,
            title,
            story.severity,
            timeout if timeout is not None else self.app.NOTIFICATION_TIMEOUT,
            markup=False,
        )
        story.shown = notification
        show(self.app, notification)

    def _hide(self, story: _Story) -> None:
        shown = story.shown
        if shown is not None:
            if shown in self.app._notifications:
                self.app._unnotify(shown)
            else:  # posted, not yet shown (two steps in one turn): it expires unseen
                shown.timeout = 0
        story.shown = None
