"""A hostile or broken far side: a `hitl` there that prints garbage, wrong types, floods or
never ends. The ssh here is a stand-in that runs the far command with `sh -c` (what ssh does
with it on the far side), so each case is a real process and a real pipe, and fast."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.journal.sent import SentJournal
from hitl_tui.model import Answer
from hitl_tui.sources.ssh import wire
from hitl_tui.sources.ssh.backend import Host, Session, SshBackend, answer_words, shell_word

#: A session leaves no pipe open behind it (an unclosed transport warns when collected).
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

FP = "sha256:" + "a" * 64


def _block(rid: str = "shop", **kw) -> dict:
    data = {
        "id": rid,
        "source": "loopkit",
        "repo": f"/far/{rid}",
        "path": f"/far/{rid}/BLOCKED.md",
        "question": "Ship?",
        "since": "2026-12-01T09:00:00+00:00",
        "fingerprint": FP,
        "choices": [{"key": "A", "option": "yes"}],
    }
    data.update(kw)
    return data


def _fake_ssh(tmp_path: Path) -> str:
    """An `ssh` that skips its options and the host and runs the command with sh -c."""
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(
        '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift; shift\nexec sh -c "$1"\n'
    )
    ssh.chmod(0o755)
    return str(ssh)


#: What a far hitl does first: the words, sent encoded (`hitl --argv ENCODED`), as typed.
DECODE = (
    "from hitl_tui.sources.ssh import wire\n"
    "if sys.argv[1:2] == [wire.ARGV]: sys.argv[1:] = wire.decode_argv(sys.argv[2:])\n"
)


def _far(tmp_path: Path, body: str, name: str = "far-hitl", host: str = "h1") -> SshBackend:
    """A backend whose far hitl is the Python program `body` (stdout: sys.stdout.buffer)."""
    script = tmp_path / name
    script.write_text(f"#!{sys.executable}\nimport sys, json, time, os\n{DECODE}{body}\n")
    script.chmod(0o755)
    backend = SshBackend(
        [Host(host, ("/far",), (str(script),), (_fake_ssh(tmp_path),))], SentJournal()
    )
    backend._control = None
    backend.alive_every = 0.5
    return backend


def _lines(*events: dict) -> str:
    text = "".join(json.dumps(e) + "\n" for e in events)
    return f"sys.stdout.write({text!r}); sys.stdout.flush()"


LIST = {"event": "list", "protocol": 1, "hitl": "0.1.0", "warnings": []}


async def _session(backend: SshBackend, seconds: float = 15) -> tuple[tuple, Inbox, list]:
    inbox = Inbox(Workspace.discover([]))
    updates: list = []

    async def on_update(scope, state, message, delta) -> None:
        updates.append((scope, state, message))

    stop = asyncio.Event()
    began = time.monotonic()
    ended = await asyncio.wait_for(
        Session(backend, backend.hosts["h1"], inbox, on_update, stop).run(), seconds
    )
    assert time.monotonic() - began < seconds
    return ended, inbox, updates


@pytest.mark.parametrize("blocks", [5, True, 1.5, "abc", {"a": 1}])
async def test_a_list_whose_blocks_are_not_a_list_ends_in_one_line(tmp_path: Path, blocks):
    backend = _far(tmp_path, _lines({**LIST, "blocks": blocks}))
    (state, message, _retry), inbox, _ = await _session(backend)
    assert (state, message) == ("error", "its hitl sent a list that is not the protocol")
    assert inbox.blocks == {}


async def test_a_flood_of_new_blocks_is_bounded(tmp_path: Path):
    flood = (
        "out = sys.stdout\n"
        f"out.write(json.dumps({{**{LIST!r}, 'blocks': []}}) + '\\n')\n"
        f"block = {_block()!r}\n"
        "for n in range(12000):\n"
        "    block['id'] = f'r{n}'; block['path'] = f'/far/r{n}/BLOCKED.md'\n"
        "    out.write(json.dumps({'event': 'added', 'block': block}) + '\\n')\n"
        "out.flush()\n"
    )
    backend = _far(tmp_path, flood)
    (_state, _message, _retry), inbox, updates = await _session(backend)
    assert len(inbox.blocks) == wire.MAX_BLOCKS
    assert updates[-1][1:] == (
        "warning",
        f"connected, {wire.MAX_BLOCKS} blocks (2000 more were not listed: over the limit)",
    )


async def test_the_text_one_host_may_list_is_bounded(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(wire, "MAX_HOST_TEXT", 3_500_000)
    big = [_block(f"r{n}", path=f"/far/r{n}/BLOCKED.md", raw="x" * 1_000_000) for n in range(5)]
    backend = _far(
        tmp_path,
        _lines({**LIST, "blocks": big[:2]}, *[{"event": "added", "block": b} for b in big[2:]]),
    )
    _ended, inbox, updates = await _session(backend)
    assert sorted(b.id for b in inbox.blocks.values()) == ["h1:r0", "h1:r1", "h1:r2"]
    assert updates[-1][1:] == (
        "warning",
        "connected, 3 blocks (2 more were not listed: over the limit)",
    )


async def test_a_line_of_100_mb_ends_the_session_in_one_line_and_in_bounded_time(tmp_path: Path):
    body = (
        _lines({**LIST, "blocks": [_block()]})
        + "\nchunk = b'x' * (1 << 20)\n"
        + "for _ in range(100): sys.stdout.buffer.write(chunk)\n"
    )
    backend = _far(tmp_path, body)
    began = time.monotonic()
    (state, message, _retry), inbox, _ = await _session(backend)
    assert (state, message) == ("error", "its hitl sent a line too long to be the protocol")
    assert time.monotonic() - began < 8  # read to the limit, then the far side is ended
    assert [b.id for b in inbox.blocks.values()] == ["h1:shop"]  # as last seen


async def test_binary_and_garbage_lines_are_skipped_and_counted(tmp_path: Path):
    body = (
        "out = sys.stdout.buffer\n"
        "out.write(b'\\xff\\xfe\\x00binary\\n{not json\\n[1,2]\\n\\x1b[31mred\\n')\n"
        f"out.write(json.dumps({{**{LIST!r}, 'blocks': [{_block()!r}, 7]}}).encode() + b'\\n')\n"
        'out.write(b\'{"event": "added", "block": {"id": [1]}}\\n\\x00\\x01\\n\')\n'
        "out.flush()\n"
    )
    backend = _far(tmp_path, body)
    (state, message, _retry), inbox, updates = await _session(backend)
    assert (state, message) == ("unreachable", "the watch ended")
    assert [b.id for b in inbox.blocks.values()] == ["h1:shop"]
    assert updates[-1][1:] == (
        "warning",
        "connected, 1 block (7 lines that were not blocks skipped)",
    )


@pytest.mark.parametrize("word", ["--force", "-x", "--dry-run"])
def test_answer_words_that_look_like_options_reach_the_far_hitl_as_values(shop: Path, word: str):
    """What the operator typed is a value, even when it starts with a dash: the far hitl
    (here the real one, through sh -c as ssh runs it) previews exactly that."""
    inbox = Inbox(Workspace.discover([shop]))
    inbox.scan()
    [local] = inbox.sorted_blocks()
    block = wire.block_from_wire(wire.block_to_wire(local), "h1")
    answer = Answer(choice=block.choices[0], note=word, operator=word)
    words = [*answer_words(block, answer), "--dry-run", "--json"]
    command = " ".join(shell_word(w) for w in [sys.executable, "-m", "hitl_tui", *words])
    ran = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert f"{word}" in json.loads(ran.stdout)["diff"]


def test_did_it_resume_asks_only_that_machines_files(tmp_path: Path, monkeypatch):
    """`resumed()` runs `hitl status --json` there: that hitl must not poll its own config's
    remotes (its [[remote]] could be this machine, or a host that hangs)."""
    from types import SimpleNamespace

    polled = tmp_path / "polled"
    marker_ssh = tmp_path / "marker-ssh"
    marker_ssh.write_text(f"#!/bin/sh\ntouch {shell_word(str(polled))}\nexit 255\n")
    marker_ssh.chmod(0o755)
    far_config = tmp_path / "far-config.toml"
    far_config.write_text(
        f'[[remote]]\nhost = "back-home"\npaths = ["/x"]\nssh = [{json.dumps(str(marker_ssh))}]\n'
    )
    far_hitl = tmp_path / "far-hitl"
    far_hitl.write_text(
        f"#!/bin/sh\nHITL_CONFIG={shell_word(str(far_config))} exec "
        f'{shell_word(sys.executable)} -m hitl_tui "$@"\n'
    )
    far_hitl.chmod(0o755)
    repo = tmp_path / "far" / "shop"
    (repo / ".git").mkdir(parents=True)
    backend = SshBackend([Host("h1", (str(repo),), (str(far_hitl),), (_fake_ssh(tmp_path),))])
    backend._control = None
    monkeypatch.setattr(backend, "_far_entry", lambda waiting: "20261201T090000Z-abcd")
    waiting = SimpleNamespace(signs={"host": "h1", "repo": str(repo)}, entry="e")
    assert backend.resumed(waiting) is None
    assert not polled.exists()


def test_did_it_resume_reads_a_status_that_exits_5_there(tmp_path: Path, monkeypatch):
    """`hitl status` there exits 5 when a restart of another answer's loop failed there: its
    report is read all the same, and this answer resumed."""
    from types import SimpleNamespace

    far = "20261201T090000Z-abcd"
    report = {
        "format": 1,
        "repos": [{"resumed": [{"entry": far, "how": "new commit 1a2b3c4"}], "restart_failed": []}],
    }
    backend = _far(tmp_path, f"print(json.dumps({report!r})); sys.exit(5)")
    monkeypatch.setattr(backend, "_far_entry", lambda waiting: far)
    waiting = SimpleNamespace(signs={"host": "h1", "repo": "/far/shop"}, entry="e")
    assert backend.resumed(waiting) == "new commit 1a2b3c4 (on h1)"


def _dropping(tmp_path: Path, status: str, undone: bool = False) -> tuple[SshBackend, object]:
    """A far side whose `answer` loses the connection (ssh's 255) and whose journal then has
    an entry of that answer with `status`."""
    from datetime import UTC, datetime

    from hitl_tui.model import Plan

    entry = {
        "id": "20261201T090000Z-far1",
        "time": datetime.now(UTC).isoformat(),
        "kind": "answer",
        "block": {"fingerprint": FP},
        "status": status,
        "undone": undone,
    }
    body = (
        "if sys.argv[1] == 'answer': sys.exit(255)\n"
        f"if sys.argv[1] == 'history': print(json.dumps([{entry!r}]))\n"
    )
    backend = _far(tmp_path, body)
    backend.settle_waits = (0.01, 0.01)
    backend.far_lifetime = 0  # the hitl there has ended: what its journal says is final
    block = wire.block_from_wire(_block(), "h1")
    plan = Plan(block, Answer(choice=block.choices[0]), (), {}, "s")
    return backend, plan


def test_an_answer_still_in_progress_there_is_not_called_unwritten(tmp_path: Path):
    from hitl_tui.model import HitlError

    backend, plan = _dropping(tmp_path, "in progress")
    backend.keeps_pending = True  # as in the app
    with pytest.raises(HitlError) as err:
        backend.send(plan)
    assert "whether the answer was written is not known yet" in str(err.value)
    [pending] = backend._pending["h1"]
    assert (pending.block_id, pending.fingerprint) == ("h1:shop", FP)


def test_an_answer_rolled_back_there_was_not_written(tmp_path: Path):
    from hitl_tui.model import HitlError

    backend, plan = _dropping(tmp_path, "rolled back")
    backend.keeps_pending = True
    with pytest.raises(HitlError) as err:
        backend.send(plan)
    assert str(err.value).endswith("nothing was written there (answer again)")
    assert not backend._pending


async def test_a_list_of_large_blocks_longer_than_one_block_line_is_read(tmp_path: Path):
    """The first line carries every block: a few large (legitimate) files make it longer than
    the bound on one block's line, and the host must still be listed."""
    text = "y" * 400_000
    blocks = [
        _block(f"r{n}", path=f"/far/r{n}/BLOCKED.md", raw=text, question=text) for n in range(12)
    ]
    backend = _far(tmp_path, _lines({**LIST, "blocks": blocks}))
    (state, message, _retry), inbox, _ = await _session(backend)
    assert (state, message) == ("unreachable", "the watch ended")
    assert len(inbox.blocks) == 12


async def test_a_session_that_fails_unexpectedly_is_that_hosts_error_and_is_retried(
    tmp_path: Path, monkeypatch
):
    """Whatever a far side makes this code trip on ends that session, not every host's
    watch: the host shows an error in one line and is tried again."""
    backend = _far(tmp_path, _lines({**LIST, "blocks": [_block()]}))

    async def trips(self, lines):
        raise KeyError("surprise")

    monkeypatch.setattr(Session, "_lines", trips)
    monkeypatch.setattr("hitl_tui.sources.ssh.backend.BACKOFF", (0.2,))
    inbox = Inbox(Workspace.discover([]))
    updates: list = []

    async def on_update(scope, state, message, delta) -> None:
        updates.append((state, message))

    stop = asyncio.Event()
    task = asyncio.ensure_future(backend.watch(inbox, on_update, stop))
    deadline = time.monotonic() + 10
    while len(updates) < 2 and time.monotonic() < deadline and not task.done():
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert (
        updates[:2]
        == [("error", "this hitl could not read what its hitl sent (KeyError), retrying in 0.2 s")]
        * 2
    )


@pytest.mark.parametrize("name", ["build-1", "ada@10.0.0.7", "[::1]", "fe80::1%eth0"])
def test_hitl_answer_host_id_names_a_block_on_any_configured_host(tmp_path: Path, name: str):
    body = (
        "if sys.argv[1] == 'list':\n"
        f"    print(json.dumps([{_block('billing/T-007')!r}, {_block('shop', path='/far/s')!r}]))\n"
    )
    backend = _far(tmp_path, body)
    backend = _far(tmp_path, body, host=name)
    assert backend.owns(f"{name}:shop") and backend.owns(f"{name}:T-007")
    assert not backend.owns(f"{name}:") and not backend.owns("elsewhere:shop")
    assert backend.read(f"{name}:shop").id == f"{name}:shop"
    assert backend.read(f"{name}:T-007").id == f"{name}:billing/T-007"


def test_an_answer_with_a_nul_is_one_line_not_a_crash(tmp_path: Path):
    from hitl_tui.model import HitlError

    backend = _far(tmp_path, "print('{}')")
    block = wire.block_from_wire(_block(), "h1")
    with pytest.raises(HitlError) as err:
        backend.plan(block, Answer(choice=block.choices[0], note="a\0b"))
    assert str(err.value) == "h1: a NUL character cannot be sent over ssh"


async def test_the_far_sides_warnings_are_shown_in_its_state(tmp_path: Path):
    said = "cannot read /far/x/BLOCKED.md:\n[bold]denied\x1b[2J"
    backend = _far(
        tmp_path,
        _lines({**LIST, "blocks": [_block()], "warnings": [said, 7]})
        + "\ntime.sleep(0.3)\n"
        + _lines(
            {"event": "added", "block": _block("api", path="/far/api/BLOCKED.md")},
            {"event": "warnings", "warnings": "not a list"},
            {"event": "warnings", "warnings": []},
        ),
    )
    _ended, _inbox, updates = await _session(backend)
    states = [(state, message) for _scope, state, message in updates]
    assert states[0] == (
        "warning",
        "connected, 1 block (1 warning there: cannot read /far/x/BLOCKED.md: [bold]denied␛[2J)",
    )
    assert states[-1] == ("ok", "connected, 2 blocks")  # the far side's warnings were cleared


async def test_stop_ends_a_far_side_that_floods_and_ignores_stdin_and_sigterm(
    tmp_path: Path, spawned: list
):
    body = (
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        + _lines({**LIST, "blocks": [_block()]})
        + "\nwhile True:\n"
        "    sys.stderr.write('e' * 65536)\n"
        "    sys.stdout.write(json.dumps({'event': 'alive', 'time': 'x'}) * 50 + '\\n')\n"
    )
    backend = _far(tmp_path, body)
    inbox = Inbox(Workspace.discover([]))
    updates: list = []

    async def on_update(scope, state, message, delta) -> None:
        updates.append((state, message))

    stop = asyncio.Event()
    session = Session(backend, backend.hosts["h1"], inbox, on_update, stop)
    task = asyncio.ensure_future(session.run())
    try:
        await asyncio.sleep(1)
        # The list, and (in the same read, or not) the flood's lines, none of them a block.
        assert updates
        state, message = updates[0]
        assert state in ("ok", "warning") and message.startswith("connected, 1 block"), message
    finally:
        stop.set()
        began = time.monotonic()
        ended = await asyncio.wait_for(task, 15)
    assert ended == ("ok", "stopped", None)
    assert time.monotonic() - began < 10
    assert len(session.err) <= 4096
    # Both pipes read to their end: none is left open (paused on a full buffer) for the
    # garbage collector, which closed it after the test's loop was gone.
    assert spawned and spawned[0].stdout.at_eof() and spawned[0].stderr.at_eof()


async def test_a_far_side_that_chatters_but_never_lists_is_given_up_on(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("hitl_tui.sources.ssh.session.FIRST_LINE", 2.0)
    body = "while True:\n    print('not the list', flush=True); time.sleep(0.1)\n"
    backend = _far(tmp_path, body)
    began = time.monotonic()
    (state, message, _retry), _inbox, _ = await _session(backend)
    assert (state, message) == ("unreachable", "no list for 2 s (the host hangs?)")
    assert time.monotonic() - began < 8


def test_an_earlier_answer_undone_there_is_not_taken_for_this_one(tmp_path: Path):
    """Answered, undone (the same bytes are back), answered again and the connection drops:
    the undone entry of the first answer does not say that this one was written."""
    from hitl_tui.model import HitlError

    backend, plan = _dropping(tmp_path, "done", undone=True)
    with pytest.raises(HitlError) as err:
        backend.send(plan)
    assert str(err.value).endswith("nothing was written there (answer again)")


def test_a_far_command_that_prints_without_end_is_cut_off(tmp_path: Path):
    """A preview whose far side prints forever: stopped at a bound, one line, no memory
    growing for the whole COMMAND_TIMEOUT."""
    from hitl_tui.model import HitlError

    backend = _far(tmp_path, "chunk = b'x' * 65536\nwhile True: sys.stdout.buffer.write(chunk)\n")
    block = wire.block_from_wire(_block(), "h1")
    began = time.monotonic()
    with pytest.raises(HitlError) as err:
        backend.plan(block, Answer(choice=block.choices[0]))
    assert str(err.value) == "h1: its hitl printed more than this hitl reads for one command"
    assert time.monotonic() - began < 10


@pytest.mark.parametrize("done", [5, "abc", {"k": 1}, None, ["wrote\x1b[2J\n x", 3]])
def test_an_answers_reply_with_wrong_types_is_read_safely(tmp_path: Path, done):
    from hitl_tui.model import Plan

    reply = {"protocol": 1, "done": done, "entry": 7}
    backend = _far(tmp_path, f"print(json.dumps({reply!r}))")
    block = wire.block_from_wire(_block(), "h1")
    said = backend.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s"))
    expected = ["on h1: wrote␛[2J x"] if isinstance(done, list) else []
    assert list(said.lines) == expected


@pytest.mark.parametrize(
    ("state", "listed"),
    [
        ("waiting", "blocked"),
        ("not-resumed", "blocked"),
        ("needs_context", "needs_context"),
        ("[b]x", "blocked"),
        (None, "blocked"),
    ],
)
def test_a_remote_block_is_in_a_state_a_block_can_have(state, listed):
    """A far side cannot disguise its block as an answer waiting for its loop (quiet, at the
    bottom of the list)."""
    assert wire.block_from_wire(_block(state=state), "h1").state == listed


@pytest.mark.parametrize(
    "since",
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "9999-12-31T23:59:59+00:00"],
)
def test_a_since_at_the_edge_of_time_is_not_a_block_or_is_one_that_shows(since):
    from hitl_tui.timefmt import age

    try:
        block = wire.block_from_wire(_block(since=since), "h1")
    except wire.WireError as exc:
        assert str(exc) == "since is not a time"
        return
    block.since.astimezone()  # what showing its time does
    age(block.since)


def test_previews_kept_for_their_editable_decision_are_bounded(tmp_path: Path, monkeypatch):
    from hitl_tui.sources.ssh.backend import Ran

    backend = _far(tmp_path, "")
    reply = json.dumps({"protocol": 1, "diff": "", "decision_text": "x" * 1000}).encode()
    monkeypatch.setattr(backend, "_run", lambda host, words, *a, **k: Ran(0, reply, ""))
    block = wire.block_from_wire(_block(), "h1")
    for n in range(1000):
        backend.plan(block, Answer(choice=block.choices[0], note=f"note {n}"))
    assert len(backend._editable) <= 256
    last = Answer(choice=block.choices[0], note="note 999")
    assert backend.decision_text(block, last) == "x" * 1000


@pytest.mark.parametrize(
    "reply",
    [
        {"repos": 5},
        {"repos": [{"resumed": 5}]},
        {"repos": [{"resumed": [{"entry": "F1", "how": 7}]}]},
        [1, 2],
        {"repos": [{"resumed": [{"entry": "F1", "how": "a new commit\x1b[2J\nabc"}]}]},
    ],
)
def test_did_it_resume_reads_a_broken_status_safely(tmp_path: Path, monkeypatch, reply):
    from types import SimpleNamespace

    backend = _far(tmp_path, f"print(json.dumps({reply!r}))")
    monkeypatch.setattr(backend, "_far_entry", lambda waiting: "F1")
    waiting = SimpleNamespace(signs={"host": "h1", "repo": "/far/shop"}, entry="e")
    said = backend.resumed(waiting)
    if isinstance(reply, dict) and "new commit" in str(reply):
        assert said == "a new commit␛[2J abc (on h1)"
    elif isinstance(reply, dict) and "F1" in str(reply):
        assert said == "it acted (on h1)"
    else:
        assert said is None


def test_a_dropped_send_outside_the_app_says_where_to_look(tmp_path: Path):
    """`hitl answer` from the command line has no watch to ask again later: the error says
    where the truth is instead of promising a reconnect that never comes."""
    from hitl_tui.model import HitlError, Plan

    backend = _far(tmp_path, "sys.exit(255)")
    backend.settle_waits = (0.01,)
    block = wire.block_from_wire(_block(), "h1")
    with pytest.raises(HitlError) as err:
        backend.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s"))
    assert str(err.value) == (
        "h1: unreachable while sending: whether the answer was written is not known yet; "
        "'hitl history' on h1 says (an answer is never applied twice)"
    )


def test_a_far_answer_that_lands_after_the_drop_is_not_called_unwritten(tmp_path: Path):
    """ssh dropped, but the hitl there (waiting for its lock, say) goes on and writes a moment
    later: its journal's silence at the first look does not mean 'nothing was written'."""
    from datetime import UTC, datetime

    from hitl_tui.model import Plan

    mark = tmp_path / "sent-at"
    entry = {"id": "F9", "kind": "answer", "block": {"fingerprint": FP}, "status": "done"}
    body = (
        f"mark = {str(mark)!r}\n"
        "if sys.argv[1] == 'answer':\n"
        "    open(mark, 'w').write(str(time.time())); sys.exit(255)\n"
        "if sys.argv[1] == 'history':\n"
        "    lands = float(open(mark).read()) + 1.0\n"
        f"    entry = {entry!r}\n"
        f"    entry['time'] = {datetime.now(UTC).isoformat()!r}\n"
        "    print(json.dumps([entry] if time.time() > lands else []))\n"
    )
    backend = _far(tmp_path, body)
    backend.settle_waits = (0.3, 0.3, 0.3, 0.3, 0.3, 0.3)
    backend.far_lifetime = 1.5
    block = wire.block_from_wire(_block(), "h1")
    said = backend.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s"))
    assert said.lines[-1] == "confirmed from h1's journal after the connection dropped"
    assert said.lines[0] == "on h1: written (F9)"


def _pending(block_id: str = "h1:shop", began=None, host: str = "h1", pid: str = "P1"):
    """A Pending as the app keeps one: the answer to `block_id` sent at `began` (now)."""
    from datetime import UTC, datetime

    from hitl_tui import journal
    from hitl_tui.model import Plan
    from hitl_tui.sources.ssh.backend import Pending

    block = wire.block_from_wire(_block(), host)
    plan = Plan(block, Answer(choice=block.choices[0], operator="Ada"), (), {}, "s")
    when = began or datetime.now(UTC)
    return Pending(pid, host, when, FP, block_id, "/far/shop", journal.remote_fields(plan))


def test_after_a_reconnect_an_answer_the_far_side_may_still_write_stays_pending(tmp_path: Path):
    backend = _far(tmp_path, "print('[]')")
    backend._pending["h1"] = [_pending()]
    assert backend.settle_pending(backend.hosts["h1"]) == []
    assert len(backend._pending["h1"]) == 1  # asked again at the next line from there
    backend.far_lifetime = 0
    said = backend.settle_pending(backend.hosts["h1"])
    assert said == ["the answer to h1:shop was not written (answer again)"]
    assert not backend._pending.get("h1")


def _undo_dropping(tmp_path: Path, history: list[dict]) -> tuple[SshBackend, object]:
    """A far side whose `undo` loses the connection (ssh's 255), and whose journal of the
    far repo then lists `history` (it fails the test if asked of another repo)."""
    from types import SimpleNamespace

    body = (
        "if sys.argv[1] == 'undo': sys.exit(255)\n"
        "if sys.argv[1] == 'history':\n"
        "    assert sys.argv[-1] == '/far/shop', sys.argv\n"
        f"    print(json.dumps({history!r}))\n"
    )
    backend = _far(tmp_path, body)
    backend.settle_waits = (0.01, 0.01)
    backend.far_lifetime = 0  # the hitl there has ended: what its journal says is final
    entry = SimpleNamespace(id="L1", repo=Path("h1:/far/shop"), sent={"host": "h1", "entry": "F1"})
    return backend, entry


ANSWER_THERE = {"id": "F1", "kind": "answer", "status": "done", "undoes": None}


def test_an_undo_whose_connection_drops_but_that_was_done_there_is_confirmed(tmp_path: Path):
    backend, entry = _undo_dropping(
        tmp_path,
        [
            {"id": "F2", "kind": "undo", "undoes": "F1", "status": "done"},
            {**ANSWER_THERE, "undone": True},
        ],
    )
    said = backend.undo_sent(entry, "Ada")
    assert said == "on h1: undone (confirmed from its journal after the connection dropped)"


def test_an_undo_whose_connection_drops_before_it_ran_says_nothing_was_undone(tmp_path: Path):
    from hitl_tui.model import HitlError

    backend, entry = _undo_dropping(tmp_path, [{**ANSWER_THERE, "undone": False}])
    with pytest.raises(HitlError) as err:
        backend.undo_sent(entry, "Ada")
    assert str(err.value) == (
        "cannot undo L1: h1: unreachable; h1's journal says F1 is not undone: nothing was "
        "undone (undo again)"
    )


@pytest.mark.parametrize(
    "history",
    [
        [
            {"id": "F2", "kind": "undo", "undoes": "F1", "status": "in progress"},
            {**ANSWER_THERE, "undone": False},
        ],
        [],  # the answer is not listed there: nothing can be told from it
        "garbage",
    ],
)
def test_an_undo_whose_outcome_cannot_be_told_says_where_to_look(tmp_path: Path, history):
    from hitl_tui.model import HitlError

    backend, entry = _undo_dropping(tmp_path, history)
    with pytest.raises(HitlError) as err:
        backend.undo_sent(entry, "Ada")
    assert str(err.value) == (
        "cannot undo L1: h1: unreachable; whether F1 was undone there is not known yet: "
        "'hitl history' on h1 says (undoing again is safe)"
    )


def test_undoing_again_an_answer_undone_there_records_the_undo_here(tmp_path: Path):
    """After a drop left it unknown, the operator undoes again: the far hitl says nothing is
    left to undo (exit 2), its journal says undone, so this one is told and journals it."""
    backend, entry = _undo_dropping(tmp_path, [{**ANSWER_THERE, "undone": True}])
    script = Path(backend.hosts["h1"].hitl[0])
    script.write_text(
        script.read_text().replace(
            "sys.exit(255)",
            "sys.stderr.write('hitl: F1 was already undone (by F2)\\n'); sys.exit(2)",
        )
    )
    assert backend.undo_sent(entry, "Ada") == "on h1: it was already undone there"


def test_a_far_undo_refused_for_another_reason_is_its_error(tmp_path: Path):
    from hitl_tui.model import HitlError

    backend, entry = _undo_dropping(tmp_path, [{**ANSWER_THERE, "undone": False}])
    script = Path(backend.hosts["h1"].hitl[0])
    script.write_text(
        script.read_text().replace(
            "sys.exit(255)", "sys.stderr.write('hitl: F1 is still in progress\\n'); sys.exit(2)"
        )
    )
    with pytest.raises(HitlError) as err:
        backend.undo_sent(entry, "Ada")
    assert "F1 is still in progress" in str(err.value)


def _drops_then_lists(tmp_path: Path, name: str = "far-hitl") -> tuple[SshBackend, Path]:
    """A far side whose `answer` loses the connection; its journal cannot be reached until
    the file `back` exists, then lists that answer, done, as its entry F7."""
    from datetime import UTC, datetime

    back = tmp_path / "back"
    entry = {"id": "F7", "kind": "answer", "block": {"fingerprint": FP}, "status": "done"}
    body = (
        f"back = {str(back)!r}\n"
        "if sys.argv[1] == 'answer': sys.exit(255)\n"
        "if sys.argv[1] == 'history':\n"
        "    if not os.path.exists(back): sys.exit(255)\n"
        f"    entry = {entry!r}\n"
        f"    entry['time'] = {datetime.now(UTC).isoformat()!r}\n"
        "    print(json.dumps([entry]))\n"
    )
    backend = _far(tmp_path, body, name=name)
    backend.settle_waits = (0.01,)
    return backend, back


def _pending_file() -> dict:
    from hitl_tui.sources.ssh.backend import PENDING_FILE
    from hitl_tui.state import files as statefile

    return json.loads(statefile.in_state(PENDING_FILE).read_text())


def test_an_answer_not_known_when_the_app_quit_is_told_by_the_next_app(tmp_path: Path):
    """The app sent an answer, the connection dropped, the host stayed away, the operator
    quit: the next app (a new backend reading the state folder) asks that machine's journal
    when the host is back, says it was written, and journals it here once."""
    from hitl_tui import journal
    from hitl_tui.model import HitlError, Plan

    first, back = _drops_then_lists(tmp_path)
    first.keeps_pending = True
    block = wire.block_from_wire(_block(), "h1")
    plan = Plan(block, Answer(choice=block.choices[0], operator="Ada"), (), {}, "s")
    with pytest.raises(HitlError) as err:
        first.send(plan)
    assert "after a restart too" in str(err.value)
    assert [p["block_id"] for p in _pending_file()["pending"]] == ["h1:shop"]
    assert journal.history() == []

    back.touch()  # the host is back; a new app starts
    second, _ = _drops_then_lists(tmp_path, name="far-hitl-2")
    second.load_pending()
    assert second.settle_pending(second.hosts["h1"]) == ["the answer to h1:shop was written (F7)"]
    [entry] = journal.history()
    assert (entry.block_id, entry.operator, entry.sent) == (
        "h1:shop",
        "Ada",
        {"host": "h1", "entry": "F7"},
    )
    assert entry.answered == block.choices[0].label()
    assert _pending_file()["pending"] == []
    third, _ = _drops_then_lists(tmp_path, name="far-hitl-3")
    third.load_pending()
    assert third.settle_pending(third.hosts["h1"]) == []  # told once


def test_a_pending_answer_answered_again_meanwhile_is_not_journaled_twice(tmp_path: Path):
    from hitl_tui import journal
    from hitl_tui.model import HitlError, Plan

    backend, back = _drops_then_lists(tmp_path)
    backend.keeps_pending = True
    block = wire.block_from_wire(_block(), "h1")
    plan = Plan(block, Answer(choice=block.choices[0]), (), {}, "s")
    with pytest.raises(HitlError):
        backend.send(plan)
    journal.record_remote(plan, "written on h1", None, {"host": "h1", "entry": "F7"})
    back.touch()
    assert backend.settle_pending(backend.hosts["h1"]) == ["the answer to h1:shop was written (F7)"]
    assert len(journal.history()) == 1


def _write_pending(items: list) -> Path:
    from hitl_tui.sources.ssh.backend import PENDING_FILE, PENDING_FORMAT
    from hitl_tui.state import files as statefile

    path = statefile.in_state(PENDING_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": PENDING_FORMAT, "pending": items}))
    return path


def test_the_pending_file_keeps_other_hosts_and_drops_the_damaged(tmp_path: Path):
    from datetime import UTC, datetime, timedelta

    def item(host: str, pid: str, **change) -> dict:
        return {**_pending(f"{host}:shop", host=host, pid=pid).to_json(), **change}

    future = (datetime.now(UTC) + timedelta(days=365)).isoformat()
    items = [
        item("h1", "P1"),
        item("elsewhere", "P2"),  # another config's host: left in the file
        item("h1", "P3", began="yesterday"),
        "garbage",
        item("h1", "P4", began="2026-12-01T00:00:00"),  # no time zone
        item("h1", "P5", began=future),  # a clock that was ahead
        item("h1", "P6", fields={"operator": "x"}),  # not what the journal records
        item("h1", "P7", fields={**item("h1", "x")["fields"], "kind": "undo"}),  # extra: dropped
    ]
    _write_pending(items)
    backend, _ = _drops_then_lists(tmp_path)
    backend.load_pending()
    assert [p.id for p in backend._pending["h1"]] == ["P1", "P7"]
    assert "kind" not in backend._pending["h1"][1].fields  # only the journal's own fields
    assert [i["id"] for i in _pending_file()["pending"] if isinstance(i, dict)] == [
        "P1",
        "P2",
        "P7",
    ]
    _write_pending([]).write_text("{not json")  # a damaged file: nothing pending, no error
    fresh, _ = _drops_then_lists(tmp_path, name="far-hitl-2")
    fresh.load_pending()
    assert fresh._pending == {}


def test_a_pending_answer_a_week_old_is_said_unknown_once_and_dropped(tmp_path: Path):
    from datetime import UTC, datetime, timedelta

    _write_pending([_pending(began=datetime.now(UTC) - timedelta(days=8)).to_json()])
    backend, _ = _drops_then_lists(tmp_path)
    backend.load_pending()
    said = backend.settle_pending(backend.hosts["h1"])
    assert said == [
        "whether the answer to h1:shop was written is still not known; 'hitl history' on h1 says"
    ]
    assert backend.settle_pending(backend.hosts["h1"]) == []
    assert _pending_file()["pending"] == []


def test_two_apps_reading_one_pending_answer_tell_it_once(tmp_path: Path):
    """Two apps at once (two terminals, two browser tabs) both read the answer the last one
    left: the first to ask that machine claims it; the other neither says nor journals it."""
    from hitl_tui import journal
    from hitl_tui.model import HitlError, Plan

    first, back = _drops_then_lists(tmp_path)
    first.keeps_pending = True
    block = wire.block_from_wire(_block(), "h1")
    with pytest.raises(HitlError):
        first.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s"))
    one, _ = _drops_then_lists(tmp_path, name="far-hitl-2")
    two, _ = _drops_then_lists(tmp_path, name="far-hitl-3")
    one.load_pending()
    two.load_pending()
    back.touch()
    said = [one.settle_pending(one.hosts["h1"]), two.settle_pending(two.hosts["h1"])]
    assert said == [["the answer to h1:shop was written (F7)"], []]
    assert len(journal.history()) == 1
    assert two._pending["h1"] == []  # and asked about no more


# -- what a review found (each of these failed before its fix) ---------------------------------


def test_a_pending_answer_is_found_among_many_newer_answers_there(tmp_path: Path):
    """Asked two days later: that machine answered 250 other blocks of that repo since. Its
    journal is read back page by page to before the send, so the answer is found, not called
    unwritten; and the pages are asked of that repository."""
    from datetime import UTC, datetime, timedelta

    two_days = datetime.now(UTC) - timedelta(days=2)
    ours = {"id": "F7", "kind": "answer", "block": {"fingerprint": FP}, "status": "done"}
    ours["time"] = (two_days + timedelta(seconds=1)).isoformat()
    other = {"kind": "answer", "block": {"fingerprint": "sha256:" + "b" * 64}, "status": "done"}
    now = datetime.now(UTC).isoformat()
    entries = [{**other, "id": f"O{i}", "time": now} for i in range(250)] + [ours]
    body = (
        f"entries = {entries!r}\n"
        "if sys.argv[1] == 'history':\n"
        "    assert sys.argv[-1] == '/far/shop', sys.argv\n"
        "    n = int(sys.argv[sys.argv.index('-n') + 1])\n"
        "    k = int(sys.argv[sys.argv.index('--page') + 1])\n"
        "    print(json.dumps(entries[(k - 1) * n : k * n]))\n"
    )
    backend = _far(tmp_path, body)
    backend._pending["h1"] = [_pending(began=two_days)]
    assert backend.settle_pending(backend.hosts["h1"]) == ["the answer to h1:shop was written (F7)"]


def test_a_journal_too_long_to_look_through_is_not_known_not_unwritten(tmp_path: Path, monkeypatch):
    from datetime import UTC, datetime, timedelta

    monkeypatch.setattr("hitl_tui.sources.ssh.backend.HISTORY_PAGES", 2)
    now = datetime.now(UTC).isoformat()
    page = [{"id": f"O{i}", "kind": "answer", "block": {}, "time": now} for i in range(100)]
    backend = _far(tmp_path, f"print(json.dumps({page!r}))")
    backend.far_lifetime = 0
    backend._pending["h1"] = [_pending(began=datetime.now(UTC) - timedelta(hours=1))]
    assert backend.settle_pending(backend.hosts["h1"]) == []
    assert len(backend._pending["h1"]) == 1  # asked again later, never "not written"


@pytest.mark.parametrize(
    "history",
    [
        "print('not json')",
        "sys.stderr.write('hitl: the journal is locked\\n'); sys.exit(1)",
        "sys.stdout.write('[' + ','.join(['{\"id\":\"X\"}'] * 1_000_000) + ']')",  # too long
    ],
)
def test_a_failing_journal_look_after_a_drop_is_not_known_yet(tmp_path: Path, history: str):
    """After the undo's (or the answer's) connection dropped, a journal look that fails is
    "cannot tell", never that failure alone: the operator learns it may have happened."""
    from types import SimpleNamespace

    from hitl_tui.model import HitlError, Plan

    body = (
        "if sys.argv[1] in ('undo', 'answer'): sys.exit(255)\n"
        f"if sys.argv[1] == 'history':\n    {history}\n"
    )
    backend = _far(tmp_path, body)
    backend.settle_waits = (0.01, 0.01)
    backend.far_lifetime = 0
    entry = SimpleNamespace(id="L1", repo=Path("h1:/far/shop"), sent={"host": "h1", "entry": "F1"})
    with pytest.raises(HitlError) as err:
        backend.undo_sent(entry, "Ada")
    assert "whether F1 was undone there is not known yet" in str(err.value)
    backend.keeps_pending = True
    block = wire.block_from_wire(_block(), "h1")
    with pytest.raises(HitlError) as err:
        backend.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s"))
    assert "whether the answer was written is not known yet" in str(err.value)
    assert len(backend._pending["h1"]) == 1  # and asked again later


def test_a_damaged_pending_file_does_not_make_the_others_vanish(tmp_path: Path):
    """The state file became unusable (too large, damaged): an answer this app keeps is
    still told and journaled, not taken for one another app told."""
    from hitl_tui import journal
    from hitl_tui.model import HitlError, Plan

    backend, back = _drops_then_lists(tmp_path)
    backend.keeps_pending = True
    block = wire.block_from_wire(_block(), "h1")
    with pytest.raises(HitlError):
        backend.send(Plan(block, Answer(choice=block.choices[0]), (), {}, "s" * 5_000_000))
    assert len(json.dumps(_pending_file())) < 10_000  # the far side's summary is not kept
    _write_pending([]).write_bytes(b"\x00" * 100)
    back.touch()
    assert backend.settle_pending(backend.hosts["h1"]) == ["the answer to h1:shop was written (F7)"]
    assert len(journal.history()) == 1


def test_a_kept_answer_is_in_the_file_before_a_look_can_see_it(tmp_path: Path, monkeypatch):
    """A line from the host while the state file is being written (a slow disk): the look
    does not see the answer yet, so it is not told now and again by the next app."""
    import threading

    from hitl_tui.state import files as statefile

    backend, back = _drops_then_lists(tmp_path)
    back.touch()
    writing, go_on = threading.Event(), threading.Event()
    real = statefile.write

    def slow(path, obj):
        writing.set()
        go_on.wait(5)
        return real(path, obj)

    monkeypatch.setattr(statefile, "write", slow)
    keeper = threading.Thread(target=backend._keep, args=(_pending(),))
    keeper.start()
    writing.wait(5)
    assert backend.settle_pending(backend.hosts["h1"]) == []  # not visible yet
    go_on.set()
    keeper.join()
    monkeypatch.setattr(statefile, "write", real)
    assert backend.settle_pending(backend.hosts["h1"]) == ["the answer to h1:shop was written (F7)"]
    nxt, _ = _drops_then_lists(tmp_path, name="far-hitl-2")
    nxt.load_pending()
    assert nxt.settle_pending(nxt.hosts["h1"]) == []  # told once


def test_a_damaged_record_cannot_be_journaled_as_anything(tmp_path: Path):
    """What the journal records comes from the checked fields only: a record in the state file
    cannot journal an undo of another entry, or files, or be written unreadable."""
    from hitl_tui import journal
    from hitl_tui.model import HitlError

    block = wire.block_from_wire(_block(), "h1")
    from hitl_tui.model import Plan

    victim = journal.record_remote(
        Plan(block, Answer(choice=block.choices[0]), (), {}, "s"), "w", None, {"host": "h1"}
    )
    fields = {**_pending().fields, "kind": "undo", "undoes": victim, "files": 5}
    journal.record_prepared(fields, "written on h1 (F7)", {"host": "h1", "entry": "F7"})
    entries = journal.history()
    assert len(entries) == 2 and not any(e.undone for e in entries)
    assert {e.kind for e in entries} == {"answer"} and all(not e.files for e in entries)
    with pytest.raises(HitlError):
        journal.record_prepared({"operator": "x"}, "w", {"host": "h1", "entry": "F7"})
    assert len(journal.history()) == 2


def flood_body(blocks: int = 2000, seconds: float = 2.0) -> str:
    """A far hitl that lists `blocks` blocks, sends `changed` lines for them in turn as fast as
    its pipe takes them for `seconds`, then its last state (every block's question 'final';
    r7 changed then removed; x1 added then removed), then waits for stdin to close."""
    return (
        f"N, SECONDS = {blocks}, {seconds}\n"
        f"base = {_block()!r}\n"
        "def block(n, r):\n"
        "    return {**base, 'id': f'r{n}', 'repo': f'/far/r{n}',\n"
        "            'path': f'/far/r{n}/BLOCKED.md', 'question': f'Ship {n}? ({r})',\n"
        "            'fingerprint': 'sha256:%064x' % abs(hash(r))}\n"
        "def line(kind, b):\n"
        "    return json.dumps({'event': kind, 'block': b})\n"
        "def gone(b):\n"
        "    return json.dumps({'event': 'removed', 'source': 'loopkit', 'path': b['path']})\n"
        "out = sys.stdout\n"
        f"out.write(json.dumps({{**{LIST!r}, 'blocks': [block(n, 0) for n in range(N)]}}))\n"
        "out.write('\\n'); out.flush()\n"
        "end, r = time.monotonic() + SECONDS, 0\n"
        "while time.monotonic() < end:\n"
        "    r += 1\n"
        "    out.write('\\n'.join(line('changed', block(n, r)) for n in range(N)) + '\\n')\n"
        "last = [line('changed', block(n, 'final')) for n in range(N)]\n"
        "last += [line('changed', block(7, 'again')), gone(block(7, 0))]\n"
        "last += [line('added', block('x1', 0)), gone(block('x1', 0))]\n"
        "out.write('\\n'.join(last) + '\\n'); out.flush()\n"
        "sys.stdin.read()\n"
    )


async def test_a_far_side_that_floods_changes_is_applied_a_few_times_a_second(tmp_path: Path):
    """`changed` lines as fast as the pipe carries them: the host is said to be flooding and
    throttled, the inbox is given its blocks a few times a second (it was given them at every
    read, which held the operator's keys for seconds), and ends as the far side's last state."""
    backend = _far(tmp_path, flood_body())
    inbox = Inbox(Workspace.discover([]))
    applies: list[float] = []
    replace, patch = inbox.replace_remote, inbox.patch_remote

    def counted(*args):
        applies.append(time.monotonic())
        return replace(*args)

    def counted_patch(*args):  # (the changes alone: the same apply, without the whole list)
        applies.append(time.monotonic())
        return patch(*args)

    inbox.replace_remote = counted  # type: ignore[method-assign]
    inbox.patch_remote = counted_patch  # type: ignore[method-assign]
    updates: list = []

    async def on_update(scope, state, message, delta) -> None:
        updates.append((state, message))

    def question(n) -> str | None:
        block = inbox.blocks.get(("remote", f"h1:/far/r{n}/BLOCKED.md"))
        return None if block is None else block.question

    stop = asyncio.Event()
    session = Session(backend, backend.hosts["h1"], inbox, on_update, stop)
    task = asyncio.ensure_future(session.run())
    try:
        deadline = time.monotonic() + 30
        while not (question(1999) == "Ship 1999? (final)" and updates[-1][0] == "ok"):
            assert time.monotonic() < deadline, f"not the last state after 30 s: {updates[-1:]}"
            assert not task.done(), (task.result(), updates[-2:])
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        ended = await asyncio.wait_for(task, 15)
    assert ended == ("ok", "stopped", None)
    flooding = [m for s, m in updates if m.startswith("flooding, throttled (")]
    assert flooding and all(s == "warning" for s, m in updates if m in flooding)
    assert re.fullmatch(
        r"flooding, throttled \([\d,]+ changes/s\); connected, 2000 blocks", flooding[0]
    )
    # The list, then (the first change at once) at most four applies a second.
    flood = applies[1:]
    seconds = flood[-1] - flood[0]
    assert len(flood) <= seconds * 4 + 2, f"{len(flood)} applies in {seconds:.1f} s"
    # The far side's last state: every block's last change, r7 removed after its change,
    # x1 added then removed (never listed at the end).
    assert len(inbox.blocks) == 1999
    assert all(question(n) == f"Ship {n}? (final)" for n in range(2000) if n != 7)
    assert question(7) is None and question("x1") is None
    assert updates[-1] == ("ok", "connected, 1999 blocks")


async def test_a_burst_of_changes_is_paced_but_not_called_a_flood(tmp_path: Path):
    """500 blocks changed at once there (a `git checkout`), then one more change once the host
    is calm: all listed, and the host's state never says it floods."""
    body = (
        flood_body(blocks=500, seconds=0).split("end, r =")[0]
        + "time.sleep(0.3)\n"
        + "out.write('\\n'.join(line('changed', block(n, 1)) for n in range(N)) + '\\n')\n"
        + "out.flush(); time.sleep(2.5)\n"
        + "out.write(line('changed', block(0, 'single')) + '\\n'); out.flush()\n"
        + "sys.stdin.read()\n"
    )
    backend = _far(tmp_path, body)
    inbox = Inbox(Workspace.discover([]))
    updates: list = []

    async def on_update(scope, state, message, delta) -> None:
        updates.append((state, message))

    def question(n) -> str | None:
        block = inbox.blocks.get(("remote", f"h1:/far/r{n}/BLOCKED.md"))
        return None if block is None else block.question

    stop = asyncio.Event()
    session = Session(backend, backend.hosts["h1"], inbox, on_update, stop)
    task = asyncio.ensure_future(session.run())
    try:
        deadline = time.monotonic() + 20
        while question(0) != "Ship 0? (single)":
            assert time.monotonic() < deadline, f"no last change after 20 s: {updates[-2:]}"
            assert not task.done(), (task.result(), updates[-2:])
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
    assert all(question(n) == f"Ship {n}? (1)" for n in range(1, 500))
    assert all(state == "ok" and "flooding" not in message for state, message in updates), updates
    assert updates[-1] == ("ok", "connected, 500 blocks")
