"""The key table of docs/keys-and-triage.md, made from the bindings themselves (`hitl_tui/keys.py`).

    .venv/bin/python scripts/keys_table.py           # rewrite it in docs/keys-and-triage.md
    .venv/bin/python scripts/keys_table.py --check   # exit 1 if its table is stale

The table sits between `<!-- keys:begin -->` and `<!-- keys:end -->`. Bindings with the same
help text (choices 1 to 9, the diff's scroll keys) share a row, as in the app's help.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hitl_tui.keys import SECTIONS, keys_for  # noqa: E402
from hitl_tui.tui.bindings import NOTES, key_name  # noqa: E402

README = ROOT / "docs" / "keys-and-triage.md"
BEGIN, END = "<!-- keys:begin -->", "<!-- keys:end -->"


def table() -> str:
    rows = ["| key | id (for `[keys]`) | what it does |", "| --- | --- | --- |"]
    for where, heading in SECTIONS.items():
        specs = keys_for(where)
        if not specs:
            continue
        rows.append(f"| **{heading}** | | |")
        merged: dict[str, tuple[list[str], list[str]]] = {}
        for spec in specs:
            keys, ids = merged.setdefault(spec.help, ([], []))
            keys.extend(key_name(k.strip()) for k in spec.keys.split(",") if k.strip())
            ids.append(spec.id)
        for what, (keys, ids) in merged.items():
            unique = list(dict.fromkeys(keys))
            if len(unique) > 3 and all(k.isdigit() for k in unique):
                unique = [unique[0], "…", unique[-1]]
            shown = " ".join(k if k == "…" else f"`{_cell(k)}`" for k in unique)
            if len(ids) > 3 and all(i[-1].isdigit() for i in ids):
                named = f"`{ids[0]}` … `{ids[-1]}`"
            else:
                named = ", ".join(f"`{i}`" for i in ids)
            rows.append(f"| {shown} | {named} | {_cell(what)} |")
        notes: list[list[str]] = []
        for line in NOTES.get(where, []):
            if line.startswith(" ") and notes:  # the help's continuation of the line above
                notes[-1][1] += " " + line.strip()
            else:
                key, _, what = line.partition(" ")
                notes.append([key, what.strip()])
        for key, what in notes:
            rows.append(f"| {_cell(key)} | | {_cell(what)} |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme_with(text: str, new_table: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + new_table + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args()
    text = README.read_text()
    wanted = readme_with(text, table())
    if args.check:
        if wanted != text:
            print(
                f"{README.relative_to(ROOT)}: the key table is stale: run scripts/keys_table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
