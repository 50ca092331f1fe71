"""Textual Bindings built from hitl's key table (`hitl_tui/keys.py`), and the help written
from the same table, so the help lists every binding, with the keys the config remapped."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from textual.binding import Binding, BindingType

from hitl_tui.keys import SECTIONS, keys_for

#: How a Textual key name is shown in the help.
KEY_NAMES = {
    "down": "↓",
    "up": "↑",
    "left": "←",
    "right": "→",
    "pagedown": "PgDn",
    "pageup": "PgUp",
    "home": "Home",
    "end": "End",
    "escape": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "space": "Space",
    "question_mark": "?",
    "slash": "/",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
}

#: Lines of the help that are no binding: the mouse, focus moves, and what is never done.
NOTES = {
    "inbox": [
        "Ctrl+P     command palette: every action by name, with its key; go to a block by id,",
        "           title or question (one the filter hides: it clears the filter); filter by repo",
    ],
    "list": [
        "mouse      click a row (a group's header row: fold it); click a choice to preview",
        "           it; scroll the detail",
    ],
    "preview": ["Tab        decision text -> Apply -> Back (asks first if you edited it)"],
}
FOOTNOTE = """
Nothing is written until you apply in the preview, and never when the block
changed since you read it: then the new version is shown instead.
Keys can be remapped in the config's [keys] table, by the ids in the README.
"""


def bindings(where: str, app_actions: Collection[str] = ()) -> list[BindingType]:
    """The Bindings of one screen or widget (`where` in keys.SECTIONS). The actions named in
    `app_actions` are the app's (`app.help`), not the screen's."""
    return [
        Binding(
            spec.keys,
            f"app.{spec.action}" if spec.action in app_actions else spec.action,
            spec.description,
            show=spec.show,
            key_display=spec.key_display,
            priority=spec.priority,
            id=spec.id,
        )
        for spec in keys_for(where)
    ]


def key_name(key: str) -> str:
    if key in KEY_NAMES:
        return KEY_NAMES[key]
    if "+" in key:
        return "+".join(
            part.capitalize() if len(part) > 1 else part.upper() for part in key.split("+")
        )
    return key


def help_text(keymap: Mapping[str, str] | None = None, width: int | None = None) -> str:
    """Every binding by section, its keys as remapped by `keymap` (binding id -> keys). Specs
    with the same help (choices 1 to 9, the diff's scroll keys) share one line. Within
    `width`, a long line wraps on spaces, its next lines indented to the description column
    (a note's to its own start)."""
    if width is None:
        return _help_text(keymap)
    text = _help_text(keymap, joined=True)
    return "\n".join(_hang(line, width) for line in text.split("\n"))


#: Where a binding's description starts: two spaces, the keys (10), a space.
DESCRIPTION_AT = 13


def _hang(line: str, width: int) -> str:
    """`line` wrapped at `width` on spaces, its next lines indented to the description."""
    import textwrap

    if len(line) <= width or not line.startswith("  "):
        return line
    return textwrap.fill(
        line,
        width=max(width, DESCRIPTION_AT + 20),
        subsequent_indent=" " * DESCRIPTION_AT,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _joined_notes(notes: list[str]) -> list[str]:
    out: list[str] = []
    for note in notes:
        if out and note.startswith(" " * (DESCRIPTION_AT - 2)):
            out[-1] += " " + note.strip()
        else:
            out.append(note)
    return out


def _help_text(keymap: Mapping[str, str] | None = None, joined: bool = False) -> str:
    keymap = keymap or {}
    out: list[str] = []
    for where, heading in SECTIONS.items():
        lines: dict[str, list[str]] = {}
        for spec in keys_for(where):
            keys = keymap.get(spec.id, spec.keys)
            names = [key_name(k.strip()) for k in keys.split(",") if k.strip()]
            lines.setdefault(spec.help, []).extend(names)
        out.append(heading)
        for what, names in lines.items():
            keys = " ".join(dict.fromkeys(names))
            if len(keys) > 10:  # its own line, the text under it
                out.append(f"  {keys}")
                keys = ""
            out.append(f"  {keys:<10} {what}")
        notes = NOTES.get(where, [])
        if joined:  # a note's second line joins its first (`_hang` wraps them as one)
            notes = _joined_notes(notes)
        out.extend(f"  {note}" for note in notes)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n" + FOOTNOTE
