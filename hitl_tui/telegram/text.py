"""What the bot's messages say: plain text (sent with no parse_mode, so nothing in it is
markup), each part of the agent's text made plain and bounded (`notices.plain`: no control
characters, no escape sequences), and well under Telegram's 4096 characters."""

from __future__ import annotations

from collections.abc import Sequence

from hitl_tui.loops.notices import plain

__all__ = ["plain"]
from hitl_tui.model import Block, Choice
from hitl_tui.telegram.api import fit

#: The longest question shown, in characters.
QUESTION_LIMIT = 1000
#: The context is cut to this many characters (the rest is in the app).
CONTEXT_LIMIT = 500
#: The most choices given a button each; the rest are answered in the app.
MAX_BUTTONS = 8
#: The longest text of a button.
BUTTON_LIMIT = 60
#: A block's message at most, in UTF-16 code units: what an edit adds still fits Telegram's 4096.
MESSAGE_LIMIT = 3300
#: The most blocks a summary lists (each with a button that sends its own message).
SUMMARY_MAX = 8

REPLY_HINT = "Reply to this message to answer in your own words."
SEVERAL = "This block asks several questions: answer it in hitl."


def title(block: Block) -> str:
    if block.id == block.repo_name or block.id.startswith(f"{block.repo_name}/"):
        return plain(block.id, 120)  # the id names the repo: shop, billing/T-012
    return f"{plain(block.repo_name, 80)} · {plain(block.id, 80)}"


def block_message(block: Block) -> str:
    """The message of a block: its repo and question, its context cut to CONTEXT_LIMIT, what
    its choices beyond the buttons are, and how to answer in one's own words."""
    parts = [title(block), plain(block.question or block.one_line_question(400), QUESTION_LIMIT)]
    if block.context.strip():
        parts.append(plain_lines(block.context, CONTEXT_LIMIT))
    if len(block.questions) > 1:
        parts.append(SEVERAL)
        return fit("\n\n".join(parts), MESSAGE_LIMIT)
    tappable = [c for c in block.choices if not c.needs_text]
    worded = len(block.choices) - len(tappable)
    if worded:
        parts.append(
            f"{_count(worded, 'choice')} need{'s' if worded == 1 else ''} your words: "
            "open it in hitl."
        )
    hidden = len(tappable) - MAX_BUTTONS
    if hidden > 0:
        parts.append(f"{_count(hidden, 'more choice')}: open in hitl.")
    parts.append(REPLY_HINT)
    return fit("\n\n".join(parts), MESSAGE_LIMIT)


def plain_lines(text: str, limit: int) -> str:
    """`text` made plain line by line (`plain`: control characters gone, whitespace folded),
    its line breaks kept and blank runs folded to one blank line, cut to `limit` characters:
    a task's labelled lines (Task:, Category:, Checked:) stay lines on the phone."""
    lines: list[str] = []
    for raw in text[: limit * 8].splitlines():
        line = plain(raw, limit)
        if line or (lines and lines[-1]):
            lines.append(line)
    out = "\n".join(lines).strip("\n")
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def shown_choices(block: Block) -> Sequence[Choice]:
    """The choices given a button: a tap answers them alone (none of a block asking several
    questions, none that needs the operator's words), at most MAX_BUTTONS."""
    if len(block.questions) > 1:
        return ()
    return [c for c in block.choices if not c.needs_text][:MAX_BUTTONS]


def hidden_choices(block: Block) -> int:
    """How many choices a tap could answer but have no button (past MAX_BUTTONS)."""
    if len(block.questions) > 1:
        return 0
    return max(0, len([c for c in block.choices if not c.needs_text]) - MAX_BUTTONS)


def button(choice: Choice) -> str:
    return plain(f"{choice.key}) {choice.option}", BUTTON_LIMIT)


def answered(message: str, what: str) -> str:
    """A block's message once answered by a tap or a reply: what was written."""
    return f"{message}\n\n✓ {plain(what, 300)}, via Telegram"


def answered_elsewhere(message: str, what: str | None = None) -> str:
    """A block's message once it is no longer open, answered in the app, with `hitl answer`,
    on another machine: what its journal says was answered, when it says."""
    if what:
        return f"{message}\n\n✓ Answered elsewhere: {plain(what, 300)}"
    return f"{message}\n\n✓ Answered elsewhere (no longer open)."


def changed(message: str) -> str:
    return f"{message}\n\n↻ The block changed since: its new version is sent below."


def late_message(block_id: str, answered_what: str) -> str:
    return (
        f"{plain(block_id, 80)}: no sign of the loop since the answer.\n\n"
        f"Answered: {plain(answered_what, 300)}"
    )


def summary_message(blocks: Sequence[Block]) -> str:
    shown = blocks[:SUMMARY_MAX]
    lines = [f"{len(blocks)} new blocks (more than a few a minute). Tap one to get its message:"]
    lines += [f"• {title(b)}: {b.one_line_question(80)}" for b in shown]
    if len(blocks) > len(shown):
        lines.append(f"and {len(blocks) - len(shown)} more: open in hitl.")
    return "\n".join(plain(line, 200) for line in lines)
