"""Deterministic apps for Pilot and snapshot tests: a fixed clock, fixed mtimes, no watcher."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hitl_tui.cli.demo import build_workspace
from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.tui.app import HitlApp

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SIZE = (120, 40)


def demo_workspace(root: Path) -> Path:
    """The demo's sample repos, with ages fixed relative to NOW."""
    build_workspace(root, now=NOW.timestamp())
    return root


def make_app(paths: list[Path], watch: bool = False) -> HitlApp:
    inbox = Inbox(Workspace.discover(paths))
    config = Config(operator="Ada", bell=False)
    return HitlApp(inbox, config=config, watch=watch, clock=lambda: NOW)
