"""Make the README's screenshots from the real app: `python scripts/screenshots.py [--png]`.

Runs HitlApp headless on the demo workspace (in a temp folder), presses the keys an operator
would, and saves an SVG of each screen to screenshots/. With --png, also renders each SVG to PNG
(needs cairosvg) so you can look at them as pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.tui_support import NOW, SIZE, demo_workspace, make_app  # noqa: E402

#: name -> keys pressed after start-up
#: (the demo lists billing/T-007, billing/T-012, shop, mobile, api, docs: oldest first)
SHOTS: dict[str, list[str]] = {
    "inbox": ["j", "j"],
    "preview": ["j", "j", "2"],
    "own-words": ["j", "j", "o", *"Keep them for 7 years, detached; legal confirmed."],
    "task-file": ["j"],
    "raw": ["end", "r"],
    "help": ["question_mark"],
    "grouped": ["v", "j", "j", "j", "enter", "j", "j"],
    "filtered": ["slash", *"billing", "enter"],
    "snooze": ["j", "j", "z"],
    "palette": ["ctrl+p", *"shop"],
    "history": ["j", "j", "2", "y", "h"],
    # Shop answered: its row waits for the loop at the bottom (end highlights it).
    "waiting": ["j", "j", "2", "y", "end"],
    # Shop answered, then the loop asks the same again (AFTER below): ↻ and the earlier answer.
    "asked-again": ["j", "j", "2", "y"],
    # With the asks of web's agent (hitl mcp, ASKS below): its question, its permission prompt.
    "ask": ["end", "k", "k"],
    "permission": ["end"],
    # With a fortnight of past answers (`demo.build_history`): the fleet's figures.
    "stats": ["S"],
}

#: The shots whose workspace also holds web's asks (`demo.build_asks`).
ASKS = {"ask", "permission"}
#: The shots whose journal holds the demo's past answers (`demo.build_history`).
HISTORY = {"stats"}

#: name -> what the loop does after the keys (given the app and the workspace), and the keys
#: pressed after that.
AFTER = {"asked-again": ("reblock", ["end"])}


async def _reblock(app, root: Path) -> None:
    """The shop loop escalates its question again: the demo's BLOCKED.md, back in place."""
    from hitl_tui.cli.demo import build_workspace

    with tempfile.TemporaryDirectory() as fresh:
        build_workspace(Path(fresh))
        block = root / "shop" / "BLOCKED.md"
        block.write_bytes((Path(fresh) / "shop" / "BLOCKED.md").read_bytes())
    app.apply_delta(app.inbox.handle([block]), announce=True)


async def shoot(name: str, keys: list[str], out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="hitl-shot-") as tmp:
        # A state folder of its own: never the operator's, and a first run (nothing marked new).
        os.environ["HITL_STATE_DIR"] = str(Path(tmp) / "state")
        root = Path(tmp) / "repos"
        if name in AFTER or name == "waiting":
            # On the real clock: the journal and resume.json write real times, and "asked
            # again" compares the answer's time with the new block's.
            from hitl_tui.cli.demo import build_workspace
            from hitl_tui.config import Config
            from hitl_tui.inbox.inbox import Inbox
            from hitl_tui.inbox.workspace import Workspace
            from hitl_tui.tui.app import HitlApp

            build_workspace(root)
            inbox = Inbox(Workspace.discover([root]))
            app = HitlApp(inbox, config=Config(operator="Ada", bell=False), watch=False)
        else:
            demo_workspace(root)
            if name in ASKS:
                from hitl_tui.cli.demo import build_asks

                build_asks(root, now=NOW.timestamp())
            if name in HISTORY:
                from hitl_tui.cli.demo import build_history

                build_history(root, now=NOW.timestamp())
            app = make_app([root])
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(100):
                await pilot.pause()
                if app.loaded:
                    break
            await app.workers.wait_for_complete()
            if keys:
                await pilot.press(*keys)
            if name in HISTORY:  # the figures, computed in the screen's worker
                for _ in range(100):
                    await pilot.pause(0.05)
                    if not getattr(app.screen, "updating", True):
                        break
            if name in AFTER:
                await app.workers.wait_for_complete()
                await pilot.pause(0.2)
                _what, more = AFTER[name]
                await _reblock(app, root)
                await pilot.pause(0.3)
                await pilot.press(*more)
            await pilot.pause(0.2)
            path = out / f"{name}.svg"
            app.save_screenshot(filename=path.name, path=str(out))
    return path


async def shoot_remote(out: Path) -> Path | None:
    """Blocks on two other machines: build-1 (a real sshd on 127.0.0.1, tests/sshd.py, with the
    demo's loops on its side) and down-1, which cannot be reached. None where no sshd runs."""
    from hitl_tui.cli.demo import build_workspace
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.sources.registry import remote_sources
    from hitl_tui.tui.app import HitlApp
    from tests.sshd import Sshd, unavailable_reason

    if unavailable_reason():
        print(f"remote: skipped ({unavailable_reason()})")
        return None
    with tempfile.TemporaryDirectory(prefix="hitl-shot-") as tmp:
        os.environ["HITL_STATE_DIR"] = str(Path(tmp) / "state")
        here = Path(tmp) / "repos"
        build_workspace(here)
        far = Path(tmp) / "far" / "loops"
        build_workspace(far)
        for name in ("billing", "shop", "docs"):  # here: the others
            shutil.rmtree(here / name, ignore_errors=True)
        with Sshd(Path(tmp) / "server") as server:
            server.start()
            tables = [
                {
                    "host": host,
                    "paths": [str(far)],
                    "hitl": str(server.remote_hitl()),
                    "ssh": server.ssh_argv(),
                }
                for host in ("build-1", "down-1")
            ]
            from hitl_tui.config import Config

            config = Config(operator="Ada", bell=False, remotes=remote_sources({"remote": tables}))
            app = HitlApp(Inbox(Workspace.discover([here])), config=config)
            async with app.run_test(size=SIZE) as pilot:
                for _ in range(400):
                    await pilot.pause(0.05)
                    states = app.source_states.get("SSH", {})
                    remote = [b for b in app.inbox.blocks.values() if b.source == "remote"]
                    if len(states) == 2 and remote and states.get("down-1", ("ok",))[0] != "ok":
                        break
                await pilot.press("home", "j", "j")  # build-1:shop
                await pilot.pause(0.3)
                path = out / "remote.svg"
                app.save_screenshot(filename=path.name, path=str(out))
                app.stop_event.set()
    return path


async def shoot_batch(out: Path) -> Path:
    """Six loops asked which Node version CI should use (four loopkit repos, two agenticloop
    tasks): `M` on one marks all six, `2` (Node 22) opens the preview of the batch."""
    from tests.support import batch_fleet
    from tests.tui_support import NOW

    with tempfile.TemporaryDirectory(prefix="hitl-shot-") as tmp:
        os.environ["HITL_STATE_DIR"] = str(Path(tmp) / "state")
        root = Path(tmp) / "repos"
        root.mkdir()
        app = make_app(batch_fleet.build(root, NOW.timestamp()))
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(100):
                await pilot.pause()
                if app.loaded:
                    break
            await app.workers.wait_for_complete()
            await pilot.press("v", "v", "v", "v", "j", "j", "M", "2")
            await app.workers.wait_for_complete()
            await pilot.pause(0.3)
            app.clear_notifications()
            await pilot.press("n", "n")
            await pilot.pause(0.2)
            path = out / "batch.svg"
            app.save_screenshot(filename=path.name, path=str(out))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--png", action="store_true", help="also write PNGs next to the SVGs")
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--only", metavar="NAME", help="make only this one (inbox, remote, ...)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shots = [
        (name, lambda name=name, keys=keys: shoot(name, keys, args.out))
        for name, keys in SHOTS.items()
    ]
    shots.append(("remote", lambda: shoot_remote(args.out)))
    shots.append(("batch", lambda: shoot_batch(args.out)))
    for name, make in shots:
        if args.only and name != args.only:
            continue
        path = asyncio.run(make())
        if path is None:
            continue
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        if args.png:
            import cairosvg

            png = path.with_suffix(".png")
            cairosvg.svg2png(url=str(path), write_to=str(png), output_width=1600)
            print(png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
