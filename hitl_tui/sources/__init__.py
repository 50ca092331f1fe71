"""Block sources: one module per format, each implementing `base.Source`."""

from __future__ import annotations

from hitl_tui.sources.agenticloop import AgenticloopSource
from hitl_tui.sources.base import Source
from hitl_tui.sources.loopkit import LoopkitSource


def default_sources() -> list[Source]:
    """A fresh instance of every local source (they cache per-repo layout)."""
    return [LoopkitSource(), AgenticloopSource()]


__all__ = ["Source", "default_sources"]
