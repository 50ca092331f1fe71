"""The real Claude Code CLI, driven offline against MCP servers (see docs/architecture.md).

`claude_bin` is the binary: `HITL_TEST_CLAUDE` (a path), else the prefix that
`scripts/install-claude-code` fills (~/.cache/hitl-tests/claude-code), else `claude` on PATH.
Missing, the tests that use it skip with the reason, except in CI (`CI` set, as `.ci/run`
does), where they fail: CI installs it.

`ClaudeCode(binary, home)` runs it with an isolated HOME (nothing of this machine's config is
read or written), a fixed small environment and a scripted Messages API
(`tests/support/messages_api.py`) as its only server: `ANTHROPIC_BASE_URL` points there and
`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` keeps it from anything else (under strace its
only connection is to the stub). `print_run` is `claude -p` with an `--mcp-config` of the
test's servers; `spawn` starts the same and returns at once (for a test that answers a tool
call while the run waits); `mcp_list` adds the servers to the temp HOME's user config and runs
`claude mcp list`. Every run has a bound: past it the whole process group is killed and the
test fails saying what the run had printed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Where scripts/install-claude-code puts it (HITL_CLAUDE_PREFIX moves it).
PREFIX = Path(
    os.environ.get("HITL_CLAUDE_PREFIX")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hitl-tests/claude-code"
)


def find_claude() -> tuple[Path | None, str]:
    """The binary to use, or None and why there is none."""
    named = os.environ.get("HITL_TEST_CLAUDE")
    if named:
        path = Path(named)
        if os.access(path, os.X_OK):
            return path, ""
        return None, f"HITL_TEST_CLAUDE={named} is not an executable file"
    installed = PREFIX / "node_modules/.bin/claude"
    if os.access(installed, os.X_OK):
        return installed, ""
    on_path = shutil.which("claude")
    if on_path:
        return Path(on_path), ""
    return None, (
        f"Claude Code is not installed (not in HITL_TEST_CLAUDE, {installed} or PATH): "
        "run scripts/install-claude-code"
    )


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The Claude Code binary, checked to run (`claude --version`)."""
    binary, why = find_claude()
    if binary is not None:
        try:
            done = subprocess.run(
                [str(binary), "--version"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            why = f"{binary} --version: {error}"
        else:
            if done.returncode == 0 and "Claude Code" in done.stdout:
                return binary
            why = f"{binary} --version exited {done.returncode}: {done.stdout}{done.stderr}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"CI installs Claude Code (.ci/run), but: {why}")
    pytest.skip(why)


@pytest.fixture
def claude_code(claude_bin: Path, tmp_path: Path) -> ClaudeCode:
    """Claude Code with a HOME of its own in the test's temp folder."""
    home = tmp_path / "claude-home"
    home.mkdir()
    return ClaudeCode(claude_bin, home)


def stdio_server(command: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One mcpServers entry: a stdio server run as `command args...` (with `env` added)."""
    entry: dict[str, Any] = {"type": "stdio", "command": command, "args": list(args)}
    if env:
        entry["env"] = dict(env)
    return entry


@dataclass
class Running:
    """A started `claude` run: `wait()` returns its CompletedProcess, or kills its process
    group at the bound and fails with what it had printed."""

    process: subprocess.Popen[str]
    argv: list[str]
    timeout: float

    def wait(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        bound = self.timeout if timeout is None else timeout
        try:
            out, err = self.process.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.process.communicate()
            raise AssertionError(
                f"claude did not finish within {bound:g} s: {self.argv!r}\n"
                f"stdout: {out[-4000:]}\nstderr: {err[-4000:]}"
            ) from None
        finally:
            self.kill()  # whatever the run left behind (an MCP server still in a call)
        return subprocess.CompletedProcess(self.argv, self.process.returncode, out, err)

    def kill(self) -> None:
        """The run and everything it started (its MCP servers, a Bash tool's commands): its
        process group, which outlives it while any of them lives."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class ClaudeCode:
    binary: Path
    home: Path

    def env(self, api_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The whole environment of a run: nothing of this machine's but PATH, LANG and hitl's
        own test settings (HITL_*: the isolated state folder an MCP server of hitl's needs)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TERM": "dumb",
            "ANTHROPIC_BASE_URL": api_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-offline",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        env.update({k: v for k, v in os.environ.items() if k.startswith("HITL_")})
        env.update(extra or {})
        return env

    def _start(self, args: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Running:
        argv = [str(self.binary), *args]
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return Running(process, argv, timeout)

    def spawn(
        self,
        prompt: str,
        *,
        api_url: str,
        servers: dict[str, dict[str, Any]],
        cwd: Path,
        permission_prompt_tool: str | None = None,
        allowed_tools: tuple[str, ...] = (),
        output_format: str = "json",
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> Running:
        """Start `claude -p PROMPT` with only `servers` as its MCP servers (--strict-mcp-config);
        `env` adds to the run's environment (MCP_TOOL_TIMEOUT, ...)."""
        config = self.home.parent / "mcp-config.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        argv = ["-p", prompt, "--mcp-config", str(config), "--strict-mcp-config"]
        argv += ["--output-format", output_format]
        if permission_prompt_tool:
            argv += ["--permission-prompt-tool", permission_prompt_tool]
        if allowed_tools:
            argv += ["--allowedTools", ",".join(allowed_tools)]
        argv += list(args)
        return self._start(argv, cwd=cwd, env=self.env(api_url, env), timeout=timeout)

    def print_run(self, prompt: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """`spawn`, then wait for it (within its timeout)."""
        return self.spawn(prompt, **options).wait()

    def mcp_list(
        self, servers: dict[str, dict[str, Any]], *, cwd: Path, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Add `servers` to the temp HOME's user config (`claude mcp add-json -s user`), then
        `claude mcp list`, which starts each and says "✔ Connected" or why not."""
        env = self.env("http://127.0.0.1:9")  # `mcp list` asks no model; port 9 refuses
        for name, entry in servers.items():
            added = self._start(
                ["mcp", "add-json", "-s", "user", name, json.dumps(entry)],
                cwd=cwd,
                env=env,
                timeout=timeout,
            ).wait()
            assert added.returncode == 0, f"claude mcp add-json {name}: {added}"
        return self._start(["mcp", "list"], cwd=cwd, env=env, timeout=timeout).wait()


def result_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON result object `claude -p --output-format json` printed."""
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"claude printed no JSON result: {done}") from None
    assert isinstance(result, dict), result
    return result
