"""The sections of agenticloop's task scaffold that nobody filled in.

A task file is made from agenticloop's template: twenty-odd sections, each holding the
template's own instructions ("Describe the starting behavior, constraints, and known gaps.")
until someone writes the task's words there. Shown in full, those instructions pushed the
question and its choices out of view; a section whose text is still the template's is read as
empty (the raw file, `r`, still shows it).

The template's section texts are known by digest: the SHA-256 of the text with its whitespace
collapsed (`digest`), its first 16 hex digits, taken from agenticloop's scaffold (the `fresh`
task of tests' agenticloop-real fixture; `tests/test_agenticloop_template.py` checks them
against it). A section with a single word changed is the task's own and is shown.

Layer: sources (the agenticloop backend package).
"""

from __future__ import annotations

import hashlib

#: Digests of the template's own section texts, by section.
TEMPLATE = frozenset(
    {
        "970166323900c135",  # Task
        "61a74ba3f29fa36a",  # Source Documents Reviewed
        "42aa9769b3669c02",  # Current State
        "f818965c7fa47c3a",  # Scope
        "defcf3e419651b5d",  # Out of Scope
        "ca0e8608482d3b9d",  # Acceptance Criteria
        "720bb3441697efe3",  # Required Checks
        "a6cc5ac72dd53fe2",  # Verification Attempts
        "ec12288cde69dfea",  # Proof Pressure
        "6679c34af8f5574e",  # Expected Files or Areas
        "fe97f3f063c68b4e",  # Implementation Notes
        "12a7b5a91f074953",  # Concurrency Plan
        "9df76299fdc0b8c8",  # Parallel Safety
        "33651b948283e088",  # Completion Summary Template
        "a8bbc73310a68f4b",  # Reviewer Checklist
        "0ffb058a8c88b3a3",  # Outcome
        "faa4c7b26a83bbb6",  # Revision Log
        "47a79f9fc80570d9",  # Grouping
        "b9eeb79f0bcb6dd0",  # Source Reference
        "b151426c048a8a49",  # Applicable Project Skills
    }
)
#: Longer than any of the template's sections: not hashed, never the template's.
LONGEST = 16_000


def digest(body: str) -> str:
    return hashlib.sha256(" ".join(body.split()).encode("utf-8", "replace")).hexdigest()[:16]


def unfilled(body: str) -> bool:
    """Whether a section's text is empty, or still the template's own instructions."""
    if not body.strip():
        return True
    return len(body) <= LONGEST and digest(body) in TEMPLATE
