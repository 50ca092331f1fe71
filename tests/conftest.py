"""Shared fixtures: sample repos copied into tmp folders, and an isolated state folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hitl_tui.journal import retention
from tests.sshd import sshd  # noqa: F401  (the real-OpenSSH fixture, tests/sshd.py)
from tests.support.claude import claude_bin, claude_code  # noqa: F401  (the real Claude Code)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory, monkeypatch):
    """Never touch the developer's own config or state folder."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("HITL_STATE_DIR", str(state))
    monkeypatch.setenv("HITL_CONFIG", str(state / "no-config.toml"))
    # No desktop session: `[notify] desktop = "auto"` sends nothing to the developer's desktop
    # (the notice tests put a notify-send of their own on PATH and ask for it).
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    # The retention an app or a command ran with is a process global (`retention.use`): a test
    # after one must read its own config again, whichever order the tests run in.
    retention.reset()
    yield state
    retention.reset()


@pytest.fixture
def cached_at_once(monkeypatch):
    """The parse cache keeps files written just now (`parsecache.RACY_NS` 0): a test's fleet
    is written a moment before it is scanned."""
    from hitl_tui.inbox import parsecache

    monkeypatch.setattr(parsecache, "RACY_NS", 0)


@pytest.fixture
def spawned(monkeypatch) -> list:
    """Every process started through `asyncio.create_subprocess_exec` in the test, in order
    (the remote tests check that each ssh is gone and its pipes read to the end)."""
    import asyncio

    started: list = []
    spawn = asyncio.create_subprocess_exec

    async def recorded(*argv, **kwargs):
        started.append(await spawn(*argv, **kwargs))
        return started[-1]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recorded)
    return started


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A copy of the loopkit-shop sample repo."""
    dest = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", dest)
    (dest / ".git").mkdir()
    return dest


@pytest.fixture
def billing(tmp_path: Path) -> Path:
    """A copy of the agenticloop-billing sample repo."""
    dest = tmp_path / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", dest)
    (dest / ".git").mkdir()
    return dest


@pytest.fixture(autouse=True, scope="session")
def _the_checkout_stays_clean():
    """No test may leave a block in hitl's own checkout (a command run in the wrong folder)."""
    yield
    stray = [name for name in ("BLOCKED.md", "PROMPT.md") if (ROOT / name).exists()]
    assert not stray, f"a test left {stray} in {ROOT}"
