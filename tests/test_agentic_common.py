"""The one splitter of an agent's explanation (`Checked: ... Tried: ...`) both agenticloop
sources use: a task file's notes and a GitHub issue's marker comment."""

from __future__ import annotations

from hitl_tui.sources.agentic_common import first_part, labelled_parts


def test_parts_in_order_with_repeats_and_white_space_runs_folded() -> None:
    head, parts = labelled_parts(
        "Cannot decide.  Checked: the  docs.\nTried: a retry. tried: again. Needed: a call"
    )
    assert head == "Cannot decide."
    assert parts == [
        ("checked", "the docs."),
        ("tried", "a retry."),
        ("tried", "again."),
        ("needed", "a call"),
    ]


def test_a_label_needs_a_word_break_before_and_a_space_after() -> None:
    text = "see http://who:8080 and Checked:nothing; nowho: x (who: Ada)"
    assert labelled_parts(text) == (
        "see http://who:8080 and Checked:nothing; nowho: x (",
        [("who", "Ada)")],
    )


def test_the_longer_label_wins_and_case_is_ignored_outside_ascii() -> None:
    head, parts = labelled_parts("Frage: Zürich? WHO CAN ANSWER: Zoë. Recommended default: ja.")
    assert head == "Frage: Zürich?"
    assert parts == [("who can answer", "Zoë."), ("recommended default", "ja.")]
    assert first_part(parts, "recommended default", "recommended") == "ja"
    assert first_part([("needed", ""), ("needed", "x.")], "needed") == "x"
    assert first_part(parts, "tried") is None


def test_no_label_no_parts() -> None:
    assert labelled_parts("  plain text  ") == ("plain text", [])
    assert labelled_parts("a: b") == ("a: b", [])
