"""The README tells the truth about what is generated: its key table is the bindings'."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_key_table_is_made_from_the_bindings() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "keys_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    readme = (ROOT / "README.md").read_text()
    from hitl_tui.keys import KEYS

    for spec in KEYS:
        if spec.id not in ("hitl.answer-1", "hitl.answer-9") and spec.id[-1].isdigit():
            continue  # 1 … 9 are one row: `hitl.answer-1` … `hitl.answer-9`
        assert f"`{spec.id}`" in readme, spec.id
