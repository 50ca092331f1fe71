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
        "Ctrl+P     command palette: every action by name; go to a block by id, title or",
        "           question; filter by repo",
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


def help_text(keymap: Mapping[str, str] | None = None) -> str:
    """Every binding by section, its keys as remapped by `keymap` (binding id -> keys). Specs
    with the same help (choices 1 to 9, the diff's scroll keys) share one line."""
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
        out.extend(f"  {note}" for note in NOTES.get(where, []))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n" + FOOTNOTE
