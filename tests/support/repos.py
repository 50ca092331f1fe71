"""Real git repositories for the tests: a loopkit sample at one commit, and git run in it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import FIXTURES

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]


def git(repo: Path, *args: str) -> str:
    """git in `repo`, with an identity of its own; its output."""
    done = subprocess.run(
        ["git", *IDENTITY, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def git_shop(repo: Path) -> Path:
    """The loopkit-shop sample at `repo`, a real git repository at one commit."""
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def git_loops(root: Path) -> Path:
    """`root` with two loopkit repos, shop and api, each a real git repository at one commit."""
    for name in ("shop", "api"):
        git_shop(root / name)
    return root
