"""`hitl mcp` (the MCP server an agent asks through) and `hitl grants` (the operator's list of
"Allow always" answers, and revoking one).

Listed in `cli.COMMANDS`. The SDK is imported only when `hitl mcp` serves; the work is in
`agent/asking.py`, `agent/mcp_server.py` and `sources/asks/`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from hitl_tui.cli import base as cli_base
from hitl_tui.model import HitlError, UsageError

MCP_EPILOG = """\
tools (each answers one JSON object in one text block; bad input: isError, nothing written):
  ask_operator(question, choices=[], context="", attempted=[], wait_seconds=0)
      files a question in REPO's inbox; waits up to wait_seconds (0-50) for the answer:
      {"status": "answered", "id", "choice", "answer"} or {"status": "queued", "id",
      "instruction"} (end the turn; call check_answer(id) on the next run)
  check_answer(id="")      {"status": "waiting" | "answered" | "unknown", "id", "choice",
                           "answer"}; no id: the newest question of REPO
  approve(tool_name, input, tool_use_id="")
      Claude Code's permission prompt: Allow once / Allow always / Deny, asked in the inbox;
      unanswered after --approve-wait it denies, naming the ask (the ask stays open)

setup (hitl mcp --print-config claude|codex|cursor prints each):
  claude mcp add hitl -- hitl mcp
  codex mcp add hitl -- hitl mcp
  claude -p "..." --permission-prompt-tool mcp__hitl__approve     (headless loops)
  and in the loop runner, before each agent call:  hitl guard || exit $?

An ask is a file in REPO/.hitl/asks/ (a folder git ignores by itself); an answer is written
there, so it reaches the agent from any machine the operator answers on.
"""


def _exe() -> str:
    """How a client should start this hitl: `hitl` when that is this one on PATH, else the
    full path of the running command."""
    here = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    found = shutil.which("hitl")
    if found and here and os.path.realpath(found) == here:
        return "hitl"
    return here or "hitl"


def snippet(client: str) -> str:
    """The lines that make `client` start `hitl mcp` for its project."""
    import json
    import shlex

    exe = _exe()
    cmd = shlex.quote(exe)
    if client == "claude":
        return (
            f"# in the project (the repository) the agent works in:\n"
            f"claude mcp add hitl -- {cmd} mcp\n"
            f"# headless loops: let the operator answer permission prompts\n"
            f'claude -p "$(cat PROMPT.md)" --permission-prompt-tool mcp__hitl__approve\n'
        )
    if client == "codex":
        return (
            f"codex mcp add hitl -- {cmd} mcp\n"
            f"# or in ~/.codex/config.toml:\n"
            f"[mcp_servers.hitl]\n"
            f"command = {json.dumps(exe)}\n"
            f'args = ["mcp"]\n'
        )
    server = {"mcpServers": {"hitl": {"command": exe, "args": ["mcp"]}}}
    return "// .cursor/mcp.json in the project\n" + json.dumps(server, indent=2) + "\n"


def build_mcp() -> argparse.ArgumentParser:
    p = cli_base.Parser(
        prog=f"{cli_base.PROG} mcp",
        description="An MCP server on stdio through which an agent (Claude Code, Codex, "
        "Cursor) asks the operator: its questions and permission prompts land in hitl's "
        "inbox, and the answers come back to it.",
        epilog=MCP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "repo",
        nargs="?",
        metavar="REPO",
        help="the repository the agent works in (default: the git top level of the current "
        "folder, where clients start a stdio server, else the folder)",
    )
    p.add_argument(
        "--approve-wait",
        metavar="DURATION",
        help="how long approve waits for the operator (default 30s, or [mcp] approve_wait; "
        "at most 10m)",
    )
    p.add_argument(
        "--print-config",
        choices=("claude", "codex", "cursor"),
        metavar="CLIENT",
        help="print the setup lines for claude, codex or cursor, and exit",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config file")
    return p


def label_of(repo: Path, roots: tuple[Path, ...]) -> str:
    """The repository's id as `hitl list` prints it with the config's repos (its path below
    the root it is found under), else its folder name."""
    from hitl_tui.inbox.workspace import path_prefixes, repo_id

    prefixes = path_prefixes(list(roots))
    real = Path(os.path.realpath(repo))
    for root in roots:
        top = Path(os.path.realpath(root))
        if real == top or top in real.parents:
            return repo_id(prefixes.get(root, ""), top, real)
    return repo.name


def run_mcp(args: argparse.Namespace) -> int:
    from hitl_tui.config import approve_wait_of, load_config

    if args.print_config:
        sys.stdout.write(snippet(args.print_config))
        return 0
    config = load_config(args.config)
    cli_base.use_config(config)
    wait = config.approve_wait
    if args.approve_wait is not None:
        try:
            wait = approve_wait_of(args.approve_wait)
        except ValueError as exc:
            raise UsageError(f"--approve-wait: {exc}") from None
    from hitl_tui.agent.escalate import find_repo

    # A client starts the server in the project's root; started below it, the asks still go to
    # the repository's root, where hitl watches.
    repo = Path(os.path.abspath(args.repo)) if args.repo else find_repo(Path.cwd())
    if not repo.is_dir():
        raise UsageError(f"not a folder: {repo}")
    import anyio

    from hitl_tui.agent.asking import Asker
    from hitl_tui.agent.mcp_server import serve

    asker = Asker(repo, label=label_of(repo, config.repos))
    anyio.run(serve, asker, wait.total_seconds())
    return 0


# -- grants ------------------------------------------------------------------------------------


def build_grants() -> argparse.ArgumentParser:
    p = cli_base.Parser(
        prog=f"{cli_base.PROG} grants",
        description="List the 'Allow always' answers to agents' permission prompts (each "
        "allows one tool with exactly one input in one repository), or revoke one. A revoke "
        "is journaled: `hitl undo` puts it back.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("--revoke", metavar="GRANT", help="remove this grant (its id: grant-...)")
    p.add_argument(
        "--operator", metavar="NAME", help="who revokes (default: the config's operator)"
    )
    cli_base.add_common(p)
    return p


def _repos(args: argparse.Namespace) -> tuple[Any, list[tuple[Path, str]]]:
    from hitl_tui.config import load_config
    from hitl_tui.inbox.workspace import Workspace

    config = load_config(args.config)
    cli_base.use_config(config)
    paths = cli_base.repo_paths(args, config)
    workspace = Workspace.discover(paths)
    return config, sorted(workspace.ids.items(), key=lambda item: item[1])


def run_grants(args: argparse.Namespace) -> int:
    import orjson

    from hitl_tui.agent.grants import listed
    from hitl_tui.textio import printable

    config, repos = _repos(args)
    found = listed(repos)
    if args.revoke:
        from hitl_tui.paths import check_state_dir

        check_state_dir(write=True)  # the revoke is journaled: refuse before writing anything
        if args.operator is not None and not args.operator.strip():
            raise UsageError("--operator is empty")
        operator = args.operator.strip() if args.operator else config.operator_name()
        return _revoke(args.revoke, found, args.json, operator)
    if args.json:
        rows: list[dict[str, Any]] = [
            {**g.to_json(repo), "repo_id": label} for repo, label, g in found
        ]
        sys.stdout.write(orjson.dumps(rows).decode("utf-8") + "\n")
        return 0
    if not found:
        print("no grants")
        return 0
    for _repo, label, g in found:
        who = f"by {printable(g.by)}, {g.granted}"
        print(f"{g.id}  {printable(label)}  {printable(g.summary)}  ({who})")
    return 0


def _revoke(wanted: str, found: list[tuple[Path, str, Any]], as_json: bool, operator: str) -> int:
    import orjson

    from hitl_tui.agent.grants import revoke
    from hitl_tui.textio import printable

    matches = [(repo, label, g) for repo, label, g in found if g.id == wanted.strip()]
    if not matches:
        raise UsageError(f"no grant {wanted!r} (see 'hitl grants')")
    repos = {repo for repo, _label, _g in matches}
    if len(repos) > 1:
        raise HitlError(f"{wanted} is in {len(repos)} repositories; name one as PATH")
    repo, label, grant = matches[0]
    done = revoke(repo, label, grant, operator)
    if as_json:
        data = {"revoked": grant.id, "repo": str(repo), "entry": done.entry, "done": done.lines}
        sys.stdout.write(orjson.dumps(data).decode("utf-8") + "\n")
    else:
        print(f"revoked {grant.id} in {printable(label)}: {printable(grant.summary)}")
        if done.entry:
            print(f"journal entry {done.entry} (hitl undo {done.entry} puts it back)")
    return 0
