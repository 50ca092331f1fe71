"""The README and docs/ tell the truth: the key table is the bindings', the quick start's config
loads, the test command is what CI runs, and every relative link leads somewhere."""

from __future__ import annotations

import os
import re
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
    readme = (ROOT / "docs" / "keys-and-triage.md").read_text()
    from hitl_tui.keys import KEYS

    for spec in KEYS:
        if spec.id not in ("hitl.answer-1", "hitl.answer-9") and spec.id[-1].isdigit():
            continue  # 1 … 9 are one row: `hitl.answer-1` … `hitl.answer-9`
        assert f"`{spec.id}`" in readme, spec.id


def _readme_toml() -> str:
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Fleet quick start") :]
    return re.search(r"```toml\n(.*?)```", quick, re.S).group(1)


def test_the_readme_quick_start_config_loads_and_restarts_the_loop(tmp_path: Path) -> None:
    """The README's one config, word for word, in a real `hitl` on a real repository under
    `~/loops`: its repos are read, its `[[loop]]` covers the block and its `[notify]` loads."""
    home = tmp_path / "home"
    repo = home / "loops" / "shop"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "BLOCKED.md").write_text(
        "# Blocked\n\n## Question\nWhich DB?\n\n## Context\nA new service.\n\n"
        "## Attempted\n- Read PROMPT.md\n\n## Choices\nA) Postgres - fine\nB) SQLite - small\n"
    )
    config = tmp_path / "config.toml"
    config.write_text(_readme_toml())
    bin_dir = tmp_path / "bin"  # the restart's program, on PATH wherever the test runs
    bin_dir.mkdir()
    (bin_dir / "tmux").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "tmux").chmod(0o755)
    env = {
        **os.environ,
        "HOME": str(home),
        "HITL_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("HITL_CONFIG", None)
    hitl = [sys.executable, "-m", "hitl_tui"]
    listed = subprocess.run(
        [*hitl, "list", "--config", str(config)], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == ""
    assert listed.stdout.split() == ["shop", "0s", "Which", "DB?"]
    plan = subprocess.run(
        [*hitl, "answer", "shop", "--choice", "A", "--dry-run", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    assert "hitl: then runs: tmux send-keys -t shop ./run.sh Enter" in plan.stderr
    assert (repo / "BLOCKED.md").exists()


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    two = readme[readme.index("## Two commands") :]
    block = two[two.index("```sh\n") : two.index("```\n", two.index("```sh\n") + 5)]
    assert "\nscripts/test " in block
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("\nexec scripts/test")


def _outside_code(text: str) -> str:
    return re.sub(r"(?ms)^(`{3,}).*?^\1", "", text)


def _anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    linked = set()
    broken = []
    for page in pages:
        text = _outside_code(page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            linked.add(dest)
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"(?m)^#+ (.*)$", _outside_code(dest.read_text()))
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert broken == []
    unlinked = {p for p in pages[1:] if p.resolve() not in linked}
    assert unlinked == set(), "docs pages the README does not link"
