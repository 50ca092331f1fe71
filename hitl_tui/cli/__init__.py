"""The command line, a client of the domain: `hitl` and its commands. `commands` (the
entry point and the answering commands), `base` (parsers and printing shared by all), and one
module per group of commands: `agent` (escalate, guard), `journal`, `triage`, `loop`,
`status`, `serve`, `watch`, and `demo`.

Layer: the top, beside `tui`: it may import anything; nothing in the domain imports it.
"""

from __future__ import annotations

from hitl_tui.cli.commands import main

__all__ = ["main"]
