"""hitl's own actions for the command palette (Ctrl+P): one Provider.

Answer the highlighted block with choice N, in your own words, undo, history, the raw file,
the keys, and "Go to block" for each listed block by id. Block ids are agent text: they are
matched and shown as plain text (the matcher builds `Content`, never markup).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from hitl_tui.textio import printable

Command = tuple[str, str, Callable[[], object]]


class HitlCommands(Provider):
    """The commands of the inbox; those about a block act on the highlighted one."""

    def commands(self) -> Iterator[Command]:
        app = self.app
        screen = app.inbox_screen  # the answer, the undo and the raw file are the screen's
        current = screen.current
        if current is not None:
            name = printable(current.id)
            for n, choice in enumerate(current.choices[:9], 1):
                label = printable(f"{choice.key}) {choice.option}")[:60]
                yield (
                    f"Answer with choice {n}",
                    f"{name}: {label}",
                    partial(screen.action_choose, n),
                )
            yield ("Answer in your own words", name, screen.action_own_words)
        yield (
            "Undo the last answer",
            "byte for byte, refused if a file moved on",
            screen.action_undo,
        )
        yield ("History", "every answer given from this machine", app.action_history)
        yield ("Raw file on / off", "the highlighted block's file as it is", screen.action_raw)
        yield ("Keys", "every key, as remapped by [keys]", app.action_help)

    def blocks(self) -> Iterator[Command]:
        screen = self.app.inbox_screen
        for block in screen.blocklist.blocks.values():
            name = printable(block.id)
            question = printable(block.one_line_question(80))
            yield (f"Go to block {name}", question, partial(screen.go_to, block))

    async def discover(self) -> Hits:
        for name, help, command in self.commands():
            yield DiscoveryHit(name, command, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for source in (self.commands(), self.blocks()):
            for name, help, command in source:
                score = matcher.match(name)
                if score > 0:
                    yield Hit(score, matcher.highlight(name), command, text=name, help=help)
