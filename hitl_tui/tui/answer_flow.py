"""The parts of answering a block that are decisions, not Textual wiring.

The inbox screen (`inbox_screen.py`) runs the flow: a choice, an optional text box, the
preview, the confirm, the write in a worker. What it asks in the text box, which drafts it
keeps between tries, and what the preview shows are decided here, so the screen reads as the
sequence of steps and these read as the rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from hitl_tui.answers.service import plan_answer, source_for
from hitl_tui.inbox.inbox import Inbox, key_of
from hitl_tui.model import Answer, Block, Choice, HitlError, Plan
from hitl_tui.textio import printable
from hitl_tui.tui.screens import Preview
from hitl_tui.tui.widgets import row_key

#: A draft's key: the block's row, and the choice it is the text of (None: own words).
DraftKey = tuple[str, str | None]


@dataclass(frozen=True)
class TextBox:
    """What the text box asks: one box per question, their first texts, and its title."""

    questions: list[str]
    defaults: list[str]
    title: str
    draft_key: DraftKey


def text_box(block: Block, choice: Choice | None) -> TextBox:
    """The text box for `choice`'s text, or for own words (`choice` None): a block that asks
    several questions gets one box for each when answered in own words."""
    questions = list(block.questions) if choice is None and len(block.questions) > 1 else []
    if questions:
        given = list(block.defaults)
        defaults = [(d or "") for d in given] + [""] * (len(questions) - len(given))
        title = f"Answer each question of {block.id}"
    else:
        questions = [block.one_line_question(400)]
        defaults = [""]
        title = (
            f"{block.id}: {choice.option} — your text"
            if choice
            else f"{block.id}: answer in your own words"
        )
    draft_key = (row_key(key_of(block)), choice.key if choice else None)
    return TextBox(questions, defaults, title, draft_key)


class Drafts:
    """The operator's own-words drafts, by block row and choice: kept while the app runs, until
    the block is answered or leaves the inbox, or the operator discards the draft."""

    def __init__(self) -> None:
        self._texts: dict[DraftKey, tuple[str, ...]] = {}

    def __contains__(self, key: DraftKey) -> bool:
        return key in self._texts

    def get(self, box: TextBox) -> tuple[str, ...] | None:
        """The draft for `box`, if it still fits (the block may now ask a different number of
        questions)."""
        draft = self._texts.get(box.draft_key)
        if draft is not None and len(draft) != len(box.questions):
            return None
        return draft

    def keep(self, box: TextBox, texts: tuple[str, ...], resumed: bool) -> bool:
        """What the box held when it closed, kept unless nothing of it is the operator's own
        (empty, or the defaults untouched in a box that did not start from a draft). True when
        a draft is kept."""
        shown = [printable(d, keep_newlines=True) for d in box.defaults]
        if not any(t.strip() for t in texts) or (not resumed and list(texts) == shown):
            self._texts.pop(box.draft_key, None)
            return False
        self._texts[box.draft_key] = texts
        return True

    def discard(self, key: DraftKey) -> None:
        self._texts.pop(key, None)

    def forget(self, rows: Iterable[str]) -> None:
        """Drop every draft of these rows (answered, or gone from the inbox)."""
        if self._texts:
            gone = set(rows)
            self._texts = {k: v for k, v in self._texts.items() if k[0] not in gone}


def preview_of(inbox: Inbox, block: Block, answer: Answer) -> Preview:
    """The preview of `answer`: its plan, and, when the block's source lets the decision text be
    edited, that text with a way to plan the answer again from the edit. Raises what
    `plan_answer` raises (a StaleError when the block changed since it was read)."""
    plan = plan_answer(inbox, block, answer)
    replan = None
    try:
        editable = source_for(inbox, block).decision_text(block, answer)
    except HitlError:
        editable = None
    if editable is not None:

        def replan(text: str) -> Plan:
            return plan_answer(inbox, block, replace(answer, decision_override=text))

    what = answer.choice.label() if answer.choice else "your own words"
    return Preview(plan, f"Answer {block.id} with {what}", editable, replan)
