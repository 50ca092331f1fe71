"""The machine side of a remote host: `hitl list --json --watch`, and the JSON of `answer`,
`answer --dry-run` and `undo`, run as real processes on real files (the format is `wire`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hitl_tui import __version__
from hitl_tui.model import Block, Choice, Section
from hitl_tui.sources.ssh import wire
from tests.support import until_sync

HITL = [sys.executable, "-m", "hitl_tui"]
NEW_BLOCK = "# Blocked\n\n## Question:\nShip on Friday?\n\n## Choices:\n- A) yes\n- B) no\n"


class Stream:
    """A running `hitl list --json --watch`, its lines read by a thread."""

    def __init__(self, *paths: Path, alive: float = 0.3) -> None:
        self.proc = subprocess.Popen(
            [*HITL, "list", "--json", "--watch", "--alive", str(alive), *map(str, paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def wait_for(self, test, timeout: float = 20.0) -> dict:
        return until_sync(
            lambda: next((e for e in list(self.lines) if test(e)), None),
            timeout,
            every=0.02,
            what="such an event",
            saw=lambda: [e.get("event") for e in self.lines],
        )

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_watch_prints_the_list_then_each_change_until_stdin_closes(shop: Path, tmp_path: Path):
    other = tmp_path / "api"
    (other / ".git").mkdir(parents=True)
    stream = Stream(shop, other)
    try:
        first = stream.wait_for(lambda e: True)
        assert first["event"] == "list"
        assert first["protocol"] == wire.PROTOCOL and first["hitl"] == __version__
        [block] = first["blocks"]
        assert block["question"].startswith("Should deleting a workspace")
        assert block["raw"] == (shop / "BLOCKED.md").read_text()
        assert block["fingerprint"].startswith("sha256:")
        assert [c["key"] for c in block["choices"]] == ["A", "B", "C"]

        (other / "BLOCKED.md").write_text(NEW_BLOCK)
        added = stream.wait_for(lambda e: e["event"] == "added")
        assert added["block"]["question"] == "Ship on Friday?"
        assert added["block"]["path"] == str(other / "BLOCKED.md")

        with (other / "BLOCKED.md").open("a") as f:
            f.write("- C) next week\n")
        changed = stream.wait_for(lambda e: e["event"] == "changed")
        assert [c["key"] for c in changed["block"]["choices"]] == ["A", "B", "C"]

        (other / "BLOCKED.md").unlink()
        removed = stream.wait_for(lambda e: e["event"] == "removed")
        assert removed == {
            "event": "removed",
            "source": "loopkit",
            "path": str(other / "BLOCKED.md"),
        }
        alive = stream.wait_for(lambda e: e["event"] == "alive")
        assert "time" in alive
    finally:
        code = stream.close()
    assert code == 0
    # every line is one JSON object: the reader parsed them all
    assert all(isinstance(e, dict) for e in stream.lines)


def test_watch_needs_json_and_refuses_a_view(shop: Path):
    out = subprocess.run([*HITL, "list", "--watch", str(shop)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == "hitl: --watch needs --json (it prints JSON lines)"
    out = subprocess.run(
        [*HITL, "list", "--json", "--watch", "--filter", "x", str(shop)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "--filter" in out.stderr and out.stderr.count("\n") == 1


def test_dry_run_json_is_the_exact_plan_and_writes_nothing(shop: Path):
    before = {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()}
    out = subprocess.run(
        [*HITL, "answer", str(shop / "BLOCKED.md"), "--choice", "B", "--dry-run", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    plan = json.loads(out.stdout)
    assert plan["protocol"] == wire.PROTOCOL
    assert plan["id"] == "shop" and plan["fingerprint"].startswith("sha256:")
    assert "+++ b/PROMPT.md" in plan["diff"] and "--- a/BLOCKED.md" in plan["diff"]
    assert "B) Keep invoices" in plan["decision_text"]
    assert {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()} == before


def test_answer_json_writes_and_undo_json_restores(shop: Path):
    fp = json.loads(
        subprocess.run(
            [*HITL, "list", "--json", str(shop)], capture_output=True, text=True, check=True
        ).stdout
    )[0]["fingerprint"]
    before = (shop / "BLOCKED.md").read_bytes()
    out = subprocess.run(
        [
            *HITL,
            "answer",
            str(shop / "BLOCKED.md"),
            "--choice",
            "B",
            "--decision",
            "Keep invoices for 7 years; ask legal about EU.",
            "--operator",
            "Ada on the laptop",
            "--expect",
            fp,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    done = json.loads(out.stdout)
    assert done["done"] == [
        "updated PROMPT.md",
        "updated IMPLEMENTATION_PLAN.md",
        "removed BLOCKED.md",
    ]
    assert done["entry"] and done["fingerprint"] == fp
    assert not (shop / "BLOCKED.md").exists()
    assert "Keep invoices for 7 years; ask legal about EU." in (shop / "PROMPT.md").read_text()
    assert "Ada on the laptop" in (shop / "IMPLEMENTATION_PLAN.md").read_text()

    again = subprocess.run(
        [*HITL, "answer", str(shop), "--choice", "B", "--expect", fp, "--json"],
        capture_output=True,
        text=True,
    )
    assert again.returncode in (2, 3) and again.stdout == ""  # never applied twice

    out = subprocess.run(
        [*HITL, "undo", done["entry"], "--json"], capture_output=True, text=True, check=True
    )
    undone = json.loads(out.stdout)
    assert undone["undone"] == done["entry"] and undone["protocol"] == wire.PROTOCOL
    assert (shop / "BLOCKED.md").read_bytes() == before


def _block(**kw) -> Block:
    base = dict(
        id="shop",
        source="loopkit",
        repo=Path("/r/shop"),
        path=Path("/r/shop/BLOCKED.md"),
        state="blocked",
        question="Q?",
        context="ctx",
        attempted=("one", "two"),
        choices=(Choice("A", "yes", "fast"), Choice("B", "other", None, needs_text=True)),
        since=__import__("datetime").datetime(2026, 12, 1, 9, tzinfo=__import__("datetime").UTC),
        fingerprint="sha256:" + "a" * 64,
        raw="# Blocked\n",
        category="contract",
        title="T",
        summary="S",
        extra=(Section("Notes", "n"),),
        problems=("p",),
        questions=("q1", "q2"),
        defaults=("d1", None),
    )
    base.update(kw)
    return Block(**base)


def test_a_block_crosses_the_wire_whole_with_the_host_in_front():
    block = _block()
    data = json.loads(json.dumps(wire.block_to_wire(block)))
    back = wire.block_from_wire(data, "build-1")
    assert back.id == "build-1:shop" and back.source == wire.REMOTE_SOURCE
    assert back.repo == "build-1:/r/shop" and back.path == "build-1:/r/shop/BLOCKED.md"
    for name in (
        "question", "context", "attempted", "choices", "since", "fingerprint", "raw",
        "category", "title", "summary", "extra", "problems", "questions", "defaults",
    ):  # fmt: skip
        assert getattr(back, name) == getattr(block, name), name
    assert back.choices[1].needs_text
    assert back.meta["remote_path"] == "/r/shop/BLOCKED.md"
    assert back.meta["remote_source"] == "loopkit"


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "block",
        {"id": "x", "source": "loopkit", "path": "/p"},  # no fingerprint
        {"id": "x", "source": "loopkit", "path": "/p", "fingerprint": "md5:1"},
        {"id": 5, "source": "loopkit", "path": "/p", "fingerprint": "sha256:" + "a" * 64},
        {
            "id": "x",
            "source": "loopkit",
            "path": "/p",
            "fingerprint": "sha256:" + "a" * 64,
            "since": "yesterday",
        },
        {
            "id": "x",
            "source": "loopkit",
            "path": "/p",
            "fingerprint": "sha256:" + "a" * 64,
            "since": "2026-12-01T00:00:00",
            "choices": [{"option": "no key"}],
        },
        {
            "id": "x",
            "source": "loopkit",
            "path": "/p",
            "fingerprint": "sha256:" + "a" * 64,
            "since": "2026-12-01T00:00:00",
            "attempted": "not a list",
        },
    ],
)
def test_what_is_not_a_block_is_refused_in_one_line(data):
    with pytest.raises(wire.WireError) as err:
        wire.block_from_wire(data, "h")
    assert "\n" not in str(err.value)


def test_a_huge_remote_block_is_bounded():
    data = wire.block_to_wire(_block())
    data["question"] = "x" * (wire.MAX_TEXT * 2)
    data["attempted"] = ["a"] * (wire.MAX_ITEMS * 3)
    back = wire.block_from_wire(data, "h")
    assert len(back.question) == wire.MAX_TEXT
    assert len(back.attempted) == wire.MAX_ITEMS


def test_a_removed_event_names_the_key_the_block_was_listed_under():
    back = wire.block_from_wire(wire.block_to_wire(_block()), "h")
    event = wire.removed_event(("loopkit", Path("/r/shop/BLOCKED.md")))
    assert wire.remote_key("h", event["source"], event["path"]) == (back.source, back.path)
    assert wire.remote_key("h", None, 3) is None


def test_a_higher_protocol_is_too_new():
    assert not wire.too_new(wire.PROTOCOL)
    assert wire.too_new(wire.PROTOCOL + 1)
    assert wire.too_new("1") and wire.too_new(True) and wire.too_new(None)


def test_watch_exits_when_its_reader_goes_away(shop: Path):
    proc = subprocess.Popen(
        [*HITL, "list", "--json", "--watch", "--alive", "0.1", str(shop)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert json.loads(proc.stdout.readline())["event"] == "list"
    proc.stdout.close()  # the reader is gone, stdin still open: the next line cannot go out
    try:
        assert proc.wait(10) == 1
    finally:
        proc.kill()
        proc.stdin.close()
    assert os.path.exists(shop / "BLOCKED.md")


# -- the command, encoded (`hitl --argv ENCODED`): what reaches the far hitl ------------------


@pytest.mark.parametrize(
    "words",
    [
        ["list", "--json", "~/loops"],
        ["answer", "/p/BLOCKED.md", "--text=a\\\\b 'q' \"d\" $(x) `y` ;*~%!\n\\", "--note=\\"],
        ["history", "", "--text=", "caf\udce9", "\x01\x7f\t", "☃"],
        [],
    ],
)
def test_encoded_words_are_safe_and_decode_byte_for_byte(words: list[str]):
    encoded = wire.encode_argv(words)
    assert all(c.isascii() and (c.isalnum() or c in "_-") for c in encoded)
    assert wire.decode_argv([encoded]) == words


def test_a_nul_cannot_be_encoded():
    from hitl_tui.model import HitlError
    from hitl_tui.sources.ssh.backend import Host, SshBackend

    with pytest.raises(ValueError):
        wire.encode_argv(["--text=a\0b"])
    backend = SshBackend([Host("h1", ("/far",))])
    with pytest.raises(HitlError, match="a NUL character cannot be sent over ssh"):
        backend.argv(backend.hosts["h1"], ["answer", "--text=a\0--force"])


@pytest.mark.parametrize("args", [[], ["a=b"], ["abcde"], ["YQAAYg"], ["YQA", "YQA"]])
def test_a_far_hitl_refuses_what_is_not_encoded_words_in_one_line(args: list[str]):
    ran = subprocess.run([*HITL, "--argv", *args], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.startswith("hitl: --argv") and ran.stderr.count("\n") == 1


def test_a_far_hitl_runs_the_decoded_words_as_typed(shop: Path):
    words = ["list", "--json", "--local", str(shop)]
    encoded = subprocess.run(
        [*HITL, "--argv", wire.encode_argv(words)], capture_output=True, text=True, timeout=60
    )
    typed = subprocess.run([*HITL, *words], capture_output=True, text=True, timeout=60)
    assert encoded.returncode == typed.returncode == 0, encoded.stderr
    assert encoded.stdout == typed.stdout and json.loads(encoded.stdout)[0]["repo"] == str(shop)


def test_the_hidden_options_stay_out_of_the_help():
    ran = subprocess.run([*HITL, "--help"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0
    assert "--argv" not in ran.stdout and "--shell-in" not in ran.stdout


def test_shell_in_enters_the_folder_and_runs_the_login_shell(tmp_path: Path):
    folder = tmp_path / "it's a\\b"
    folder.mkdir()
    env = {**os.environ, "SHELL": "/bin/sh"}
    ran = subprocess.run(
        [*HITL, "--argv", wire.encode_argv([wire.SHELL_IN, str(folder)])],
        input="pwd\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 0 and ran.stdout == f"{folder}\n", ran.stderr
    gone = subprocess.run(
        [*HITL, wire.SHELL_IN, str(tmp_path / "gone")], capture_output=True, text=True, env=env
    )
    assert gone.returncode == 1 and gone.stderr.startswith("hitl: cannot enter ")
