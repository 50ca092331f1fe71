"""The app with `[[github]]` sources: blocks arrive beside local ones, answers go over the API."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from textual.widgets import TextArea

from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.sources.registry import remote_sources
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.github_fake import CREDENTIALS_NOTE as NOTE
from tests.github_fake import TOKEN, FakeGithub
from tests.hostile_servers import SlowLoris
from tests.support import until
from tests.tui_support import NOW, SIZE


@pytest.fixture
def fake():
    server = FakeGithub().start()
    server.add_issue("acme/shop", 12, title="Nightly export", labels=("blocked",))
    server.add_comment("acme/shop", 12, NOTE)
    yield server
    server.stop()


@pytest.fixture
def local(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-gh-here"))
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text("## Question\nLocal question?\n## Choices\n- A) yes\n")
    return repo


def _app(repo: Path, github: tuple[dict, ...]) -> HitlApp:
    config = Config(operator="Ada", bell=False, remotes=remote_sources({"github": list(github)}))
    return HitlApp(Inbox(Workspace.discover([repo])), config=config, clock=lambda: NOW)


async def test_github_block_listed_and_answered_in_the_app(local: Path, fake: FakeGithub) -> None:
    app = _app(local, ({"repo": "acme/shop", "api_url": fake.url},))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(BlockList)

        def ids() -> set[str]:  # the open blocks (not the answers waiting for their loop)
            return {b.id for b in table.blocks.values() if b.state != "waiting"}

        await until(pilot, lambda: "acme/shop#12" in ids())
        assert "shop" in ids()
        assert "GitHub 1/1 ok" in str(app.query_one("#topbar").render())
        await pilot.press("home")
        for _ in table.order:
            if table.current.id == "acme/shop#12":
                break
            await pilot.press("j")
        assert table.current.id == "acme/shop#12"
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        await pilot.press(*"It is set.")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("enter")
        # (the GitHub watcher runs until the app stops: wait for the answer, not for workers)
        await until(pilot, lambda: "acme/shop#12" not in ids())
        # The issue's answer waits for the loop to act on it, as a local one does.
        assert [b.id for b in table.blocks.values() if b.state == "waiting"] == ["acme/shop#12"]
        assert fake.comments[("acme/shop", 12)][-1]["body"] == "It is set.\n\n— Ada, via hitl\n"
        assert fake.labels_of("acme/shop", 12) == []
        assert any(n.title == "Answered" for n in app._notifications)
        assert TOKEN not in str(app.query_one("#topbar").render())
        app.stop_event.set()


async def test_own_words_start_from_each_questions_default_on_github_too(
    local: Path, fake: FakeGithub
) -> None:
    """`o` on an issue asking several questions: one box per question, each pre-filled with
    that question's recommended default, as for a task file."""
    fake.add_issue("acme/shop", 20, title="Export format")
    fake.add_comment(
        "acme/shop",
        20,
        "Questions:\n1. Per line or per invoice? Recommended: per line.\n"
        "2. Which port? Recommended: 8080.\n\nAGENT_TASK_STATUS: needs_context\n",
    )
    app = _app(local, ({"repo": "acme/shop", "api_url": fake.url},))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(BlockList)
        await until(pilot, lambda: "acme/shop#20" in {b.id for b in table.blocks.values()})
        await pilot.press("home")
        for _ in table.order:
            if table.current.id == "acme/shop#20":
                break
            await pilot.press("j")
        assert table.current.id == "acme/shop#20"
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        boxes = list(app.screen.query(".answer-text").results(TextArea))
        assert [box.text for box in boxes] == ["per line", "8080"]
        await pilot.press("escape")
        app.stop_event.set()


async def test_unreachable_source_is_shown_and_hides_nothing(local: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = _app(local, ({"repo": "acme/shop", "api_url": f"http://127.0.0.1:{port}"},))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(app.source_states), seconds=20)
        bar = str(app.query_one("#topbar").render())
        assert "GitHub 0/1 ok" in bar and "acme/shop" in bar
        assert {b.id for b in app.query_one(BlockList).blocks.values()} == {"shop"}
        assert any(n.title == "GitHub source" for n in app._notifications)
        app.stop_event.set()


async def test_a_slow_loris_source_gives_up_and_hides_nothing(local: Path) -> None:
    """The app's poller has the same bound as `hitl list`: the source says why, once."""
    server = SlowLoris().start()
    source = {"repo": "acme/shop", "api_url": server.url, "poll_timeout_seconds": 2}
    app = _app(local, (source,))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: bool(app.source_states), seconds=2 + 5)
            [(state, message)] = app.source_states["GitHub"].values()
            assert (state, message) == ("unreachable", "no complete answer within 2 s")
            assert {b.id for b in app.query_one(BlockList).blocks.values()} == {"shop"}
            assert "GitHub 0/1 ok" in str(app.query_one("#topbar").render())
            app.stop_event.set()
    finally:
        server.stop()
    assert server.connections == 1  # backed off: no second try piled up meanwhile
