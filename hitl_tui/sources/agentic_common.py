"""What agenticloop's task files and its GitHub issues share: the block categories and what
each means, the labels of the parts of an agent's explanation (`Checked: ... Tried: ...`),
and the lettering of the choices each derives from a block.

Both sources read these from here and never from each other (a source never imports another).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hitl_tui.model import Choice

#: FORMATS.md §2.2 (wording after the blocked-state seed); unknown categories show as they are.
CATEGORIES = {
    "transient": "a retryable failure persisted after a reasonable retry",
    "credentials": "auth, a token, a provider or a permission is missing or invalid",
    "contract": "the task record is impossible, contradictory, missing key information, "
    "or waiting on a change-request approval",
    "review-exhausted": "review rounds are no longer making progress",
    "review-unknown": "a review gave no clear accepted or needs_revision result",
    "merge-conflict": "the implementation cannot be merged cleanly",
    "ci-failure": "required remote checks are failing or incomplete",
    "tooling-failure": "the diagnostic budget for a command or host-tool defect ran out",
    "no-artifact": "the implementation ran but produced nothing reviewable",
    "no-progress": "the attempt budget or self-loop guard tripped with no new progress",
}

#: Where a GitHub issue's Context words a category otherwise (the wording it has always shown;
#: kept so that the screen is unchanged by this refactoring).
ISSUE_WORDING = {
    "credentials": "auth, token, provider or permission is missing or invalid",
    "contract": "the task is impossible, contradictory, missing key information, "
    "or waiting on a change-request approval",
    "tooling-failure": "the diagnostic budget for a host-tool defect was exhausted",
    "no-artifact": "implementation ran but produced no reviewable artifact",
}
#: The meanings as a GitHub issue shows them.
ISSUE_CATEGORIES = {**CATEGORIES, **ISSUE_WORDING}

#: The labels of an explanation's parts, lower case (both sources match them ignoring case).
#: A label that begins another (`who` and `who can answer`) is tried after it.
NOTE_LABELS = (
    "recommended default",
    "recommended",
    "missing evidence",
    "who can unblock",
    "who can answer",
    "who",
    "checked",
    "tried",
    "needed",
)


#: A label where a part begins: at the start, or after a space or `.;,(`, then `:` and a space
#: (or the end): `Tried: x` is a part, `see http://who:8080` and `Checked:x` are not.
_LABEL = re.compile(
    r"(?:^|(?<=[\s.;,(]))(" + "|".join(re.escape(x) for x in NOTE_LABELS) + r")\s*:(?=\s|$)",
    re.IGNORECASE,
)
#: _LABEL for lower-cased ASCII text: a case-sensitive match is about twice as fast, and
#: lower-casing ASCII keeps every position.
_LABEL_LOWER = re.compile(
    r"(?:^|(?<=[\s.;,(]))(" + "|".join(re.escape(x) for x in NOTE_LABELS) + r")\s*:(?=\s|$)"
)


def labelled_parts(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Split `head. Checked: x. Tried: y.` at its labels: (the text before the first label,
    [(label in lower case, its text with runs of white space as one space), ...] in order,
    repeats and empty parts included)."""
    if ":" not in text:
        return text.strip(), []
    if text.isascii():
        matches = list(_LABEL_LOWER.finditer(text.lower()))
    else:
        matches = list(_LABEL.finditer(text))
    if not matches:
        return text.strip(), []
    parts = []
    for m, nxt in zip(matches, [*matches[1:], None], strict=False):
        end = nxt.start() if nxt is not None else len(text)
        parts.append((m.group(1).lower(), " ".join(text[m.end() : end].split())))
    return text[: matches[0].start()].strip(), parts


def first_part(parts: list[tuple[str, str]], *labels: str) -> str | None:
    """The first non-empty part under any of `labels`, without a closing full stop."""
    for label, value in parts:
        if label in labels and value:
            return value.rstrip(" .") or None
    return None


def lettered(rows: Sequence[tuple[str, str, str | None, bool]]) -> tuple[Choice, ...]:
    """Derived choices, (kind, option, consequence, needs_text) each, keyed A, B, C... in the
    order given; each Choice carries its kind (what its planner does)."""
    return tuple(
        Choice("ABCDEFGH"[i], option, consequence, needs_text, kind)
        for i, (kind, option, consequence, needs_text) in enumerate(rows)
    )
