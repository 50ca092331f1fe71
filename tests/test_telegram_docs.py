"""The README's Telegram setup tells the truth: its systemd unit is the one shipped in docs/,
systemd reads it without a complaint and it keeps the token out, and its chat-id command
finds the chat id in what a Bot API server answers (the local one of tests/support)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui.config import load_config
from hitl_tui.telegram import api, bot
from hitl_tui.telegram.settings import TelegramConfig
from tests.support.telegram_api import OPERATOR, TelegramAPI

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "docs" / "hitl-listen.service"
SECTION = "## Answer from your phone (Telegram)"


def _section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index(SECTION)
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_readme_unit_is_the_shipped_unit() -> None:
    shown = re.search(r"```ini\n(.*?)```", _section(), re.S).group(1)
    assert shown == UNIT.read_text()
    assert "[docs/hitl-listen.service](docs/hitl-listen.service)" in _section()


def test_the_unit_keeps_the_token_out() -> None:
    settings = [line for line in UNIT.read_text().splitlines() if line and line[0] not in "#;"]
    assert "EnvironmentFile=%h/.config/hitl/telegram.env" in settings
    assert not [line for line in settings if "TOKEN" in line.upper() or "Environment=" in line]
    assert [line for line in settings if line.startswith("ExecStart=")] == [
        "ExecStart=%h/.local/bin/hitl listen"
    ]


def _verify(unit: Path, home: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_reads_the_unit_without_a_complaint(tmp_path: Path) -> None:
    """`systemd-analyze --user verify` on the shipped unit, in a home where `hitl` is where
    the unit says (~/.local/bin) and the token file exists: no error, no warning (an unknown
    key or a bad value is a line on stderr). The same unit naming a missing program fails, so
    the check is a real one."""
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "hitl").symlink_to(Path(sys.executable).parent / "hitl")
    (home / ".config" / "hitl").mkdir(parents=True)
    (home / ".config" / "hitl" / "telegram.env").write_text("HITL_TELEGRAM_TOKEN=1:x\n")
    unit = tmp_path / "hitl-listen.service"
    shutil.copy(UNIT, unit)
    verified = _verify(unit, home, tmp_path)
    assert (verified.returncode, verified.stderr) == (0, ""), verified.stderr
    (home / ".local" / "bin" / "hitl").unlink()
    missing = _verify(unit, home, tmp_path)
    assert missing.returncode != 0 and "is not executable" in missing.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl here")
def test_the_readme_chat_id_command_prints_the_chat_id() -> None:
    """Step 4's command, word for word but for the server's address, against a Bot API server
    that received a message from the operator and one from a group."""
    command = re.search(r"`(curl -s [^`]*getUpdates[^`]*)`", _section()).group(1)
    assert "https://api.telegram.org/bot$HITL_TELEGRAM_TOKEN/getUpdates" in command
    with TelegramAPI() as tg:
        tg.send_text("hi")
        group = tg.add_chat(chat_id=-1001234567890, title="ops")
        tg.send_text("hi all", chat_id=group["id"])
        printed = subprocess.run(
            ["sh", "-c", command.replace("https://api.telegram.org", tg.api)],
            env={**os.environ, "HITL_TELEGRAM_TOKEN": tg.token},
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert printed.stdout.splitlines() == [
        f'"chat":{{"id":{OPERATOR["id"]}',
        '"chat":{"id":-1001234567890',
    ], printed.stderr


def test_the_readme_telegram_table_loads_as_written_and_with_its_comments_taken(
    tmp_path: Path,
) -> None:
    """Step 5's table, word for word, is a valid `[telegram]`; so is it with its two
    commented keys taken (a user id in the list)."""
    table = re.search(r"```toml\n(.*?)```", _section(), re.S).group(1)
    table = "\n".join(line.removeprefix("   ") for line in table.splitlines()) + "\n"
    config = tmp_path / "config.toml"
    config.write_text(table)
    assert load_config(config).telegram == TelegramConfig(chat_id=123456789)
    taken = re.sub(r"(?m)^# ", "", table).replace("[...]", "[42]")
    config.write_text(taken)
    assert load_config(config).telegram == TelegramConfig(
        chat_id=123456789, allowed_user_ids=frozenset({42}), api="https://api.telegram.org"
    )


def test_the_stated_bounds_are_the_code_s() -> None:
    """The bounds docs/config.md states for [telegram] are the client's constants (which
    tests/test_telegram_hostile.py holds `hitl listen` to)."""
    page = (ROOT / "docs" / "config.md").read_text()
    start = page.index("There is no `token` key")
    text = " ".join(page[start : page.index("\n#", start)].split())
    assert f"bounded in total ({api.CALL_TIMEOUT:g} s;" in text
    assert f"holds up to {bot.POLL_TIMEOUT} s for an update, plus {api.POLL_SLACK:g} s" in text
    assert f"each answer at {api.MAX_BODY // (1 << 20)} MiB" in text
    assert f"`retry_after` is honoured up to {api.MAX_RETRY_AFTER:g} s" in text
    assert f"back off from 1 s to {bot.MAX_BACKOFF:g} s" in text
