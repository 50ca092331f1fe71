"""hitl's own actions for the command palette (Ctrl+P): one Provider.

Every action of the inbox and of the list, built from the key table (`hitl_tui/keys.py`) so a
new key is a new command; "Go to block" for each listed block, matched over its id, title and
question; and "Filter by repo" for each repository with a listed block. Block ids, titles and
questions are agent text: they are matched and shown as plain text (the matcher builds
`Content`, never markup).

One stable order, whatever is typed (the same `Down Enter` does the same kind of thing for
every query): a block whose id is exactly the query first, then the blocks, then the actions
(hitl's, a repository's filter, Textual's theme and screenshot). Each band's scores are kept
apart (`EXACT`, `BLOCKS`, `_squash`); within a band the better match comes first. Each action
shows its key; an action is listed once (Textual's own "Quit" and "Keys" are hitl's).

At 5,000 blocks opening the palette must stay instant: `discover` shows a few blocks only, and
`search` scores every block cheaply (its id fuzzily, after an in-order test of the letters; its
title and question by the words typed, fuzzy matching of long prose matching nearly anything)
and makes Hits for the best BLOCK_HITS only.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.actions import parse
from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, Provider, SearchIcon
from textual.content import Content
from textual.fuzzy import Matcher

from hitl_tui.keys import KEYS, KeySpec
from hitl_tui.model import Block
from hitl_tui.textio import printable

Command = tuple[str, str, Callable[[], object]]
#: A palette entry: its name, its help line, what it runs, and its keys ("" for none).
Entry = tuple[str, str, Callable[[], object], str]

#: Where the palette's actions come from: the key table's sections the inbox answers to.
SECTIONS = ("inbox", "list")
#: The app's actions (not the inbox screen's), as in InboxScreen.BINDINGS.
APP_ACTIONS = frozenset({"quit", "help", "history", "grants", "stats"})
#: The palette's name for a key, when the help's line is not a good one.
NAMES = {
    "hitl.own-words": "Answer in your own words",
    "hitl.raw": "Raw file on / off",
    "hitl.undo": "Undo the highlighted answer, or the last answer (asks first)",
    "hitl.history": "History",
    "hitl.grants": "Grants: allow-always answers",
    "hitl.stats": "Fleet stats: time blocked per repo, blocks per day, waits",
    "hitl.help": "Keys",
    "hitl.quit": "Quit",
    "hitl.group": "Next grouping: none, by repo, by source, by state, by question",
    "hitl.mark": "Mark / unmark the highlighted block (a group, on its header row)",
    "hitl.mark-same": "Mark every open block asking the same question",
    "hitl.clear-marks": "Clear the marks",
}
#: Blocks shown before anything is typed (the rest are a search away).
DISCOVER_BLOCKS = 5
#: Blocks a search lists at most: the best matches (a Hit each; never one per block).
BLOCK_HITS = 40
#: What a query may start with to say it looks for a block.
GO_TO = "go to block"
#: The score of a block whose id is exactly the query, and where the blocks' band starts:
#: above every action (actions score below 1, `_squash`).
EXACT = 3.0
BLOCKS = 1.0


def _squash(score: float) -> float:
    """A matcher's score (0 up) into 0..1, in the same order: a band's scores never reach the
    band above."""
    return score / (1.0 + score) if score > 0 else 0.0


def keys_shown(spec: KeySpec, keymap: dict[str, str] | None = None) -> str:
    """The keys of `spec` as the help shows them (remapped by the config's `[keys]`)."""
    from hitl_tui.tui.bindings import key_name

    keys = (keymap or {}).get(spec.id, spec.keys)
    names = [key_name(k.strip()) for k in keys.split(",") if k.strip()]
    return " ".join(dict.fromkeys(names))


def block_query(query: str) -> str:
    """What of `query` is matched against the blocks: without a leading "go to block" (or the
    start of it), which every block's command begins with."""
    words = " ".join(query.lower().split())
    if GO_TO.startswith(words):
        return ""
    if words.startswith(GO_TO + " "):
        return words[len(GO_TO) + 1 :]
    return words


def palette_specs() -> list[KeySpec]:
    """The key table's entries the palette offers, in the table's order."""
    return [spec for spec in KEYS if spec.where in SECTIONS]


def _subsequence(query: str, text: str) -> bool:
    """Every character of `query` in `text`, in order: what any fuzzy match needs. Cheap, so
    the fuzzy matcher only scores the few blocks that pass."""
    at = 0
    for char in query:
        at = text.find(char, at)
        if at < 0:
            return False
        at += 1
    return True


def _run(target: object, action: str) -> object:
    """Run `action` (`choose(2)`, `page(1)`) on `target` now, as its key would: called, not
    scheduled, so what it opens is open when the palette has closed."""
    _, name, params = parse(action)
    return getattr(target, f"action_{name}")(*params)


def _shown(prompt: Content, help: str, keys: str = "") -> Content:
    """A hit's two lines, built here: the palette parses a Hit's `help` (a str) as markup, so
    agent text (a block's question) must never go there. An action's keys follow its name."""
    if keys:
        prompt = Content.assemble(prompt, "  ", Content(keys).stylize_before("bold"))
    return Content.assemble(prompt, "\n", Content(help).stylize_before("dim"))


def repo_filter(name: str) -> str:
    """The inbox filter for one repository (a name with a space is quoted)."""
    return f'repo:"{name}"' if any(c.isspace() for c in name) or '"' in name else f"repo:{name}"


class HitlCommands(Provider):
    """The commands of the inbox; those about a block act on the highlighted one."""

    @property
    def _inbox(self) -> Any:
        """The app's inbox screen (`HitlApp.inbox_screen`; the app imports this module, which
        so does not name it)."""
        app: Any = self.app
        return app.inbox_screen

    def commands(self) -> Iterator[Command]:
        """Every action, each once: its name, help and what it runs."""
        for name, help, command, _ in self.entries():
            yield (name, help, command)

    def entries(self) -> Iterator[Entry]:
        """Every action, each once (by its name, in any case), with its keys."""
        seen: set[str] = set()
        for entry in self._entries():
            if entry[0].lower() not in seen:
                seen.add(entry[0].lower())
                yield entry

    def _entries(self) -> Iterator[Entry]:
        app: Any = self.app
        keymap = getattr(getattr(app, "config", None), "keys", None)
        screen = self._inbox  # the answer, the undo and the raw file are the screen's
        current = screen.current
        for spec in palette_specs():
            keys = keys_shown(spec, keymap)
            if spec.id.startswith("hitl.answer-"):
                n = int(spec.action.removeprefix("choose(").rstrip(")"))
                if current is None or n > len(current.choices):
                    continue
                choice = current.choices[n - 1]
                label = printable(f"{choice.key}) {choice.option}")[:60]
                yield (
                    f"Answer with choice {n}",
                    f"{printable(current.id)}: {label}",
                    partial(screen.action_choose, n),
                    keys,
                )
                continue
            if spec.id == "hitl.own-words" and current is None:
                continue
            name = NAMES.get(spec.id) or spec.help[:1].upper() + spec.help[1:]
            help = printable(current.id) if spec.id == "hitl.own-words" and current else spec.help
            if spec.action in APP_ACTIONS:
                target: object = app
            elif spec.where == "list":
                target = screen.blocklist
            else:
                target = screen
            yield (name, help, partial(_run, target, spec.action), keys)
        # Textual's own (theme, screenshot; its "Quit" and "Keys" are hitl's, listed above).
        try:
            system = list(app.get_system_commands(self.screen))
        except Exception:  # a Textual without them
            system = []
        for command in system:
            yield (command.title, command.help, command.callback, "")

    def _go_to(self, block: Block) -> Entry:
        name = printable(block.id)
        title = printable(block.title or "")
        question = printable(block.one_line_question(80))
        help = " · ".join(t for t in (title, question) if t)
        return (f"Go to block {name}", help, partial(self._inbox.go_to, block), "")

    def _filter(self, name: str) -> Entry:
        return (
            f"Filter by repo {printable(name)}",
            "only this repository's blocks",
            partial(self._inbox.set_filter, repo_filter(name)),
            "",
        )

    def _repos(self) -> list[str]:
        return sorted({b.repo_name for b in self._inbox.blocklist.blocks.values()})

    async def discover(self) -> Hits:
        # Before anything is typed: a few blocks, then the actions (the bands' order).
        blocks = self._inbox.blocklist.blocks
        for block in list(blocks.values())[:DISCOVER_BLOCKS]:
            name, help, command, _ = self._go_to(block)
            yield DiscoveryHit(_shown(Content(name), help), command, text=name)
        for name, help, command, keys in self.entries():
            yield DiscoveryHit(_shown(Content(name), help, keys), command, text=name)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help, command, keys in self.entries():
            score = matcher.match(name)
            if score > 0:
                prompt = _shown(matcher.highlight(name), help, keys)
                yield Hit(_squash(score), prompt, command, text=name)
        for repo in self._repos():
            name, help, command, _ = self._filter(repo)
            score = matcher.match(name)
            if score > 0:
                prompt = _shown(matcher.highlight(name), help)
                yield Hit(_squash(score), prompt, command, text=name)
        # Blocks: id, title and question are matched; Hits only for the best few.
        wanted = block_query(query)
        blocks = list(self._inbox.blocklist.blocks.values())
        if not wanted:  # only "go to block" typed so far: a few, as before typing
            for index, block in enumerate(blocks[:DISCOVER_BLOCKS]):
                name, help, command, _ = self._go_to(block)
                prompt = _shown(matcher.highlight(name), help)
                yield Hit(BLOCKS + 0.5 - index * 0.01, prompt, command, text=name)
            return
        inner = Matcher(wanted)
        squeezed = "".join(wanted.split())
        words = wanted.split()
        scored: list[tuple[float, int, Block]] = []
        for index, block in enumerate(blocks):
            if index % 500 == 499:
                await asyncio.sleep(0)  # a long list leaves the keys their turn
            ident = printable(block.id)
            if ident.lower() == wanted:  # exactly its id: first of all
                scored.append((EXACT, -index, block))
                continue
            score = inner.match(ident) if _subsequence(squeezed, ident.lower()) else 0
            if score > 0:
                score = BLOCKS + 0.5 + 0.49 * _squash(score)
            else:
                # Its title or question holds every word typed: ranked below an id's match.
                text = f"{printable(block.title or '')} {printable(block.question)}".lower()
                if all(word in text for word in words):
                    score = BLOCKS + 0.49 * _squash(0.5 + 0.1 * len(squeezed))
            if score > 0:
                scored.append((score, -index, block))
        for score, _, block in heapq.nlargest(BLOCK_HITS, scored):
            name, help, command, _ = self._go_to(block)
            yield Hit(score, _shown(matcher.highlight(name), help), command, text=name)


#: The palette's search icon in a browser: Textual's 🔎 is an emoji, which the page's font
#: (Roboto Mono) lacks, and a browser with no emoji font (a server's, offline) drew a box.
WEB_SEARCH_ICON = ">"


class HitlPalette(CommandPalette):
    """Textual's command palette; served to a browser (`hitl serve`), its icon is one the
    page's font has. In a terminal it is Textual's own."""

    def on_mount(self) -> None:
        if self.app.is_web:
            self.query_one(SearchIcon).icon = WEB_SEARCH_ICON
