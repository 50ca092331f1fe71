"""Every key binding of the app, as plain data: its id, default keys, action and help text.

The TUI builds its Textual Bindings from this table (`tui/bindings.py`), the help screen is
written from it, and the config's `[keys]` table is checked against its ids: no Textual here,
so `hitl list` can read a config without loading the UI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeySpec:
    #: Stable id for `[keys]` in the config (`"hitl.answer-1" = "f1"`).
    id: str
    #: Default keys, Textual names, comma-separated (`"down,j"`).
    keys: str
    action: str
    #: The footer's word for it.
    description: str
    #: Where it works: a key of SECTIONS.
    where: str
    #: The help screen's line for it.
    help: str
    show: bool = True
    key_display: str | None = None
    priority: bool = False


#: Where a key works -> the help screen's heading for it, in the help's order.
SECTIONS = {
    "list": "Moving",
    "inbox": "In the inbox",
    "filter": "In the filter (/)",
    "snooze": "Snoozing a block (z)",
    "reuse": "Reusing an earlier answer (p)",
    "preview": "In the preview of an answer",
    "batch": "In the preview of a batch (marked blocks)",
    "batch-result": "In the result of a batch",
    "text": "In a text box (your own words)",
    "discard": "Asked before a draft or an edit is thrown away",
    "undo": "Asked before an answer is undone (u)",
    "act": "Asked before t, R or x acts (a shell or a command run, a row dropped)",
    "help": "In this help",
    "history": "In the history",
    "grants": "In the grants (A)",
    "stats": "In the fleet stats (S)",
    "revoke": "Asked before a grant is revoked (x)",
}

KEYS: tuple[KeySpec, ...] = (
    KeySpec("hitl.down", "down,j", "cursor_down", "Move", "list", "next block", key_display="j/k"),
    KeySpec("hitl.up", "up,k", "cursor_up", "Up", "list", "previous block", show=False),
    KeySpec("hitl.page-down", "pagedown", "page(1)", "Page down", "list", "a page down", False),
    KeySpec("hitl.page-up", "pageup", "page(-1)", "Page up", "list", "a page up", False),
    KeySpec("hitl.first", "home,g", "first", "First", "list", "first block", False),
    KeySpec("hitl.last", "end,G", "last", "Last", "list", "last (newest) block", False),
    KeySpec(
        "hitl.fold",
        "enter",
        "fold",
        "Fold",
        "list",
        "on a group's header row: fold / unfold the group",
        False,
    ),
    KeySpec(
        "hitl.mark",
        "space",
        "mark",
        "Mark",
        "inbox",
        "mark / unmark the highlighted block (on a group's header row: the whole group); "
        "a choice key or o then answers every marked block",
        False,
    ),
    KeySpec(
        "hitl.mark-same",
        "M",
        "mark_same",
        "Mark same",
        "inbox",
        "mark every open block asking the same question as the highlighted one",
        False,
    ),
    KeySpec(
        "hitl.clear-marks",
        "escape",
        "clear_marks",
        "Clear marks",
        "inbox",
        "clear the marks",
        False,
    ),
    KeySpec("hitl.quit", "q", "quit", "Quit", "inbox", "quit"),
    KeySpec(
        "hitl.filter",
        "slash",
        "filter",
        "Filter",
        "inbox",
        "filter as you type: words, repo:, cat:, state:, src:, id:, age:>1h, -word",
        key_display="/",
        # Handled as the app reads it, before the keys typed on behind it reach the list:
        # those are the filter's (`InboxScreen.action_filter`).
        priority=True,
    ),
    KeySpec(
        "hitl.order",
        "s",
        "cycle_order",
        "Order",
        "inbox",
        "next order: longest blocked first, newest, by repo, by category, by source",
        False,
    ),
    KeySpec(
        "hitl.group",
        "v",
        "cycle_group",
        "Group",
        "inbox",
        "next grouping: none, by repo, by source, by state, by question (similar questions "
        "together); Enter on a group's header folds it, Space marks it",
        False,
    ),
    KeySpec("hitl.next-new", "n", "next_new(1)", "Next new", "inbox", "next new block (●)", False),
    KeySpec(
        "hitl.previous-new", "N", "next_new(-1)", "Prev new", "inbox", "previous new block", False
    ),
    KeySpec(
        "hitl.snooze",
        "z",
        "snooze",
        "Snooze",
        "inbox",
        "snooze the highlighted block (in the snoozed view: bring it back)",
        False,
    ),
    KeySpec(
        "hitl.snoozed",
        "Z",
        "snoozed_view",
        "Snoozed",
        "inbox",
        "show the snoozed blocks instead / back to the inbox",
        False,
    ),
    KeySpec("hitl.help", "question_mark", "help", "Keys", "inbox", "this help", key_display="?"),
    KeySpec("hitl.own-words", "o", "own_words", "Own words", "inbox", "answer in your own words"),
    KeySpec(
        "hitl.note",
        "w",
        "note",
        "Note, keep",
        "inbox",
        "reply and keep it blocked: your note where the loop reads it (no restart; u undoes)",
        False,
    ),
    KeySpec("hitl.raw", "r", "raw", "Raw file", "inbox", "raw file on / off"),
    KeySpec(
        "hitl.list-taller",
        "plus,equals_sign",
        "list_size(1)",
        "Taller list",
        "inbox",
        "the list taller, the detail shorter",
        False,
        key_display="+",
    ),
    KeySpec(
        "hitl.list-shorter",
        "minus",
        "list_size(-1)",
        "Shorter list",
        "inbox",
        "the list shorter, the detail taller",
        False,
        key_display="-",
    ),
    KeySpec(
        "hitl.list-zoom",
        "L",
        "list_zoom",
        "Zoom list",
        "inbox",
        "the list on the whole screen, the detail hidden / back",
        False,
    ),
    KeySpec(
        "hitl.reuse",
        "p",
        "reuse",
        "Reuse",
        "inbox",
        "reuse an earlier answer to a similar question (↻, Asked before): opens its preview",
        False,
    ),
    KeySpec(
        "hitl.undo",
        "u",
        "undo",
        "Undo last",
        "inbox",
        "undo the highlighted answer (else the last one): asks first, again if the loop "
        "acted on it",
    ),
    KeySpec(
        "hitl.open",
        "t",
        "open_loop",
        "To the loop",
        "inbox",
        "to the highlighted block's loop: its [[loop]] open command, else a shell in the repo "
        "(asks first, naming it)",
        False,
    ),
    KeySpec(
        "hitl.restart",
        "R",
        "restart_loop",
        "Restart loop",
        "inbox",
        "run the highlighted block's [[loop]] restart (again, for one that did not resume): "
        "asks first, naming the command",
        False,
    ),
    KeySpec(
        "hitl.dismiss",
        "x",
        "dismiss_waiting",
        "Drop waiting",
        "inbox",
        "drop the highlighted answer waiting for its loop from the list (you saw to it): "
        "asks first",
        False,
    ),
    KeySpec(
        "hitl.history",
        "h",
        "history",
        "History",
        "inbox",
        "history: every answer given, and whether it was undone",
    ),
    KeySpec(
        "hitl.grants",
        "A",
        "grants",
        "Grants",
        "inbox",
        "grants: the Allow always answers to agents' permission prompts (x revokes one)",
        False,
    ),
    KeySpec(
        "hitl.stats",
        "S",
        "stats",
        "Stats",
        "inbox",
        "fleet stats: time blocked per repo, blocks per day, waits and answers that did not "
        "take; Enter on a repo filters the inbox to it",
        False,
    ),
    *(
        KeySpec(
            f"hitl.answer-{n}",
            str(n),
            f"choose({n})",
            f"Choice {n}",
            "inbox",
            "pick that choice: a preview shows the exact diff of every file",
            show=False,
        )
        for n in range(1, 10)
    ),
    KeySpec("preview.back", "escape", "cancel", "Back", "preview", "back, nothing written"),
    KeySpec("preview.apply", "y", "apply", "Apply", "preview", "apply (Enter on Apply too)"),
    KeySpec(
        "preview.restart",
        "r",
        "toggle_restart",
        "Restart on/off",
        "preview",
        "run the loop's restart after applying, or not (when a [[loop]] covers the repo)",
        False,
    ),
    KeySpec(
        "preview.edit",
        "e",
        "edit",
        "Edit decision",
        "preview",
        "edit the decision text that goes into PROMPT.md",
    ),
    # The diff is not in the Tab order (Tab goes decision -> Apply -> Back); these keys
    # scroll it from the buttons (in the decision box they move its cursor).
    KeySpec(
        "preview.down",
        "down",
        "scroll_diff(1)",
        "Scroll diff",
        "preview",
        "scroll the diff",
        False,
    ),
    KeySpec(
        "preview.up", "up", "scroll_diff(-1)", "Scroll diff", "preview", "scroll the diff", False
    ),
    KeySpec(
        "preview.page-down",
        "pagedown",
        "scroll_diff(10)",
        "Scroll diff",
        "preview",
        "scroll the diff",
        False,
    ),
    KeySpec(
        "preview.page-up",
        "pageup",
        "scroll_diff(-10)",
        "Scroll diff",
        "preview",
        "scroll the diff",
        False,
    ),
    KeySpec("batch.back", "escape", "cancel", "Back", "batch", "back, nothing written"),
    KeySpec("batch.apply", "y", "apply", "Apply", "batch", "apply every ready block"),
    KeySpec(
        "batch.next",
        "n",
        "next_section(1)",
        "Next block",
        "batch",
        "next block's section",
        key_display="n/N",
    ),
    KeySpec(
        "batch.previous",
        "N",
        "next_section(-1)",
        "Previous block",
        "batch",
        "previous block's section",
        False,
    ),
    *(
        KeySpec(
            f"batch.pick-{n}",
            str(n),
            f"pick({n})",
            f"Choice {n}",
            "batch",
            "pick that choice of this block (one that lists no such option: choose)",
            show=False,
        )
        for n in range(1, 10)
    ),
    KeySpec("batch.skip", "s", "skip", "Skip", "batch", "skip this block: nothing written to it"),
    KeySpec(
        "batch.restart",
        "r",
        "toggle_restart",
        "Restarts on/off",
        "batch",
        "run the loops' restarts after applying, or not",
        False,
    ),
    KeySpec("batch.down", "down", "scroll(1)", "Scroll", "batch", "scroll the diffs", False),
    KeySpec("batch.up", "up", "scroll(-1)", "Scroll", "batch", "scroll the diffs", False),
    KeySpec(
        "batch.page-down", "pagedown", "scroll(10)", "Scroll", "batch", "scroll the diffs", False
    ),
    KeySpec("batch.page-up", "pageup", "scroll(-10)", "Scroll", "batch", "scroll the diffs", False),
    KeySpec(
        "batch-result.undo",
        "u",
        "undo",
        "Undo batch",
        "batch-result",
        "undo the whole batch (asked first; a block whose loop moved on is refused, named)",
    ),
    KeySpec("batch-result.close", "escape,q,enter", "close", "Close", "batch-result", "close"),
    KeySpec("text.back", "escape", "cancel", "Back", "text", "back (what you typed stays a draft)"),
    KeySpec(
        "text.submit",
        "ctrl+s,ctrl+j,alt+enter",
        "submit",
        "Continue to preview",
        "text",
        "continue to the preview",
        priority=True,
    ),
    KeySpec(
        "filter.clear", "escape", "clear", "Clear", "filter", "clear the filter, back to the list"
    ),
    KeySpec(
        "filter.done",
        "enter",
        "done",
        "Keep",
        "filter",
        "back to the list, the filter kept",
    ),
    KeySpec("snooze.15m", "1", "pick('15m')", "15 min", "snooze", "for 15 minutes"),
    KeySpec("snooze.1h", "2", "pick('1h')", "1 hour", "snooze", "for an hour"),
    KeySpec("snooze.4h", "3", "pick('4h')", "4 hours", "snooze", "for 4 hours"),
    KeySpec(
        "snooze.tomorrow", "4", "pick('tomorrow')", "Tomorrow", "snooze", "until tomorrow 09:00"
    ),
    KeySpec(
        "snooze.change", "5", "pick('change')", "Until it changes", "snooze", "until it changes"
    ),
    KeySpec("snooze.cancel", "escape", "cancel", "Cancel", "snooze", "cancel, nothing snoozed"),
    *(
        KeySpec(f"reuse.{n}", str(n), f"pick({n})", f"Answer {n}", "reuse", "reuse that answer")
        for n in range(1, 4)
    ),
    KeySpec("reuse.cancel", "escape", "cancel", "Cancel", "reuse", "cancel, nothing reused"),
    KeySpec("undo.yes", "y", "yes", "Undo", "undo", "undo it"),
    KeySpec(
        "undo.force",
        "f",
        "force",
        "Undo anyway",
        "undo",
        "undo it anyway (asked again: the loop has acted on the answer)",
    ),
    KeySpec("undo.keep", "escape,n", "keep", "Keep", "undo", "keep the answer: nothing undone"),
    KeySpec("act.yes", "y", "yes", "Do it", "act", "do it: what the question names"),
    KeySpec("act.keep", "escape,n", "keep", "Cancel", "act", "cancel: nothing run or dropped"),
    KeySpec("discard.discard", "d", "discard", "Discard", "discard", "discard"),
    KeySpec("discard.keep", "escape,n,k", "keep", "Keep editing", "discard", "keep editing"),
    KeySpec("help.close", "escape,q,question_mark", "close", "Close", "help", "close the help"),
    KeySpec("history.close", "escape,q,h", "close", "Close", "history", "close the history"),
    KeySpec(
        "history.down", "down,j", "cursor_down", "Move", "history", "next answer", key_display="j/k"
    ),
    KeySpec("history.up", "up,k", "cursor_up", "Up", "history", "previous answer", show=False),
    KeySpec(
        "history.filter",
        "slash",
        "filter",
        "Filter",
        "history",
        "filter as you type: id, repo, block, answer, operator (Esc back to the list)",
        key_display="/",
        priority=True,  # as hitl.filter: the letters typed on behind it are the filter's
    ),
    KeySpec(
        "history.expand",
        "space",
        "expand",
        "Expand",
        "history",
        "on a batch's line: show / hide its answers (Enter too); u there undoes the batch",
        False,
    ),
    KeySpec(
        "history.undo",
        "u",
        "undo",
        "Undo this",
        "history",
        "undo the highlighted answer, as hitl undo ID does: asks first, again if the loop "
        "acted on it",
    ),
    KeySpec("grants.close", "escape,q,A", "close", "Close", "grants", "close the grants"),
    KeySpec(
        "grants.down", "down,j", "cursor_down", "Move", "grants", "next grant", key_display="j/k"
    ),
    KeySpec("grants.up", "up,k", "cursor_up", "Up", "grants", "previous grant", show=False),
    KeySpec(
        "grants.revoke",
        "x",
        "revoke",
        "Revoke",
        "grants",
        "revoke the highlighted grant: asks first; journaled, so hitl undo puts it back",
    ),
    KeySpec("stats.close", "escape,q,S", "close", "Close", "stats", "close the stats"),
    KeySpec("stats.down", "down,j", "cursor_down", "Move", "stats", "next row", key_display="j/k"),
    KeySpec("stats.up", "up,k", "cursor_up", "Up", "stats", "previous row", show=False),
    KeySpec(
        "stats.first",
        "home,g",
        "first",
        "First",
        "stats",
        "first row (all repos)",
        False,
        priority=True,
    ),
    KeySpec("stats.last", "end,G", "last", "Last", "stats", "last row", False, priority=True),
    KeySpec(
        "stats.filter",
        "enter",
        "filter_repo",
        "Filter inbox",
        "stats",
        "close, and filter the inbox to the highlighted repo (on all repos: clear the filter)",
    ),
    KeySpec("stats.sort", "s", "cycle_sort", "Sort", "stats", "sort by the next column (▼)"),
    KeySpec("stats.window", "w", "cycle_window", "Window", "stats", "the window: 30, 90 or 7 days"),
    KeySpec("revoke.yes", "y", "yes", "Revoke", "revoke", "revoke it"),
    KeySpec("revoke.keep", "escape,n", "keep", "Keep", "revoke", "keep the grant: nothing revoked"),
    KeySpec(
        "text.editor",
        "ctrl+e",
        "editor",
        "Editor",
        "text",
        "edit the text in $VISUAL / $EDITOR (vi); what you save comes back",
        priority=True,
    ),
)

IDS = frozenset(k.id for k in KEYS)


def keys_for(where: str) -> list[KeySpec]:
    return [k for k in KEYS if k.where == where]


#: Sections whose keys are live at the same time (the inbox screen and its list); every other
#: section is live alone (a modal, a box).
TOGETHER = (("list", "inbox"),)


def clashes(keymap: dict[str, str]) -> list[tuple[str, str, str]]:
    """(key, one id, another id) for each key that `keymap` (id -> keys, over the defaults)
    gives to two bindings live at the same time."""
    groups = [set(g) for g in TOGETHER]
    groups += [{w} for w in SECTIONS if not any(w in g for g in groups)]
    found = []
    for group in groups:
        owner: dict[str, str] = {}
        for spec in KEYS:
            if spec.where not in group:
                continue
            for key in keymap.get(spec.id, spec.keys).split(","):
                key = key.strip()
                if not key:
                    continue
                if key in owner and owner[key] != spec.id:
                    found.append((key, owner[key], spec.id))
                owner.setdefault(key, spec.id)
    return found
