"""Block sources: one module per format or backend, each implementing `base.Source`."""

from __future__ import annotations

from hitl_tui.sources.base import Source


def default_sources() -> list[Source]:
    """A fresh instance of every local source (they cache per-repo layout); see `registry`."""
    from hitl_tui.registry import local_sources

    return local_sources()


__all__ = ["Source", "default_sources"]
