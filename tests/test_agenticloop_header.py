"""The fast reader of simple task headers agrees with the full YAML loader, or steps aside.

`_simple_header` reads the usual `key: value` headers without PyYAML's generic constructor (it
is most of a scan's time). Whenever it returns a mapping, the YAML loader must return the same
one, value types included; anything it is unsure of returns None and goes to the full loader.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hitl_tui.sources.agenticloop import _simple_header, load_header


def _full(text: str) -> object:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


@pytest.mark.parametrize(
    "text",
    [
        "task_id: T-007\nstatus: blocked\nblock_category: contract\n",
        "# comment\nimplementation_artifact:\nattempt_budget: 3\nflag: no\nwhen: 2026-01-01\n",
        "allowed_paths: [\"src/storage/\", 'docs/a b.md', 12, yes]  # trailing\n",
        "paths:\n  - src/\n  - 'b'\n  # between\n  - 3\nnext: x\n",
        "paths:\n- a\n- b\n",
        "status : blocked\nempty: # only a comment\nn: ~\nf: .nan\ni: 0x1F\ns: 1:30\n",
        'k: it\'s fine\nq: "say hi"\nhash: a#b\n',
    ],
)
def test_simple_headers_read_as_yaml_reads_them(text: str) -> None:
    fast = _simple_header(text)
    assert fast is not None
    assert repr(fast) == repr(_full(text))
    assert repr(load_header(text)) == repr(_full(text))


@pytest.mark.parametrize(
    "text",
    [
        "status:\n  blocked\n",  # continued scalar
        "a: &x 1\nb: *x\n",  # aliases: the full loader refuses them
        "a: !!str 1\n",
        "a: |\n  text\n",
        "a: 'it''s'\n",
        'a: "tab\\t"\n',
        "nested:\n  key: value\n",
        "<<: {a: 1}\n",
        "a: [1, [2]]\n",
        "a:\tb\n",
        "é: ü\n",
        "a: b: c\n",
        "- a\n",
        "? a\n",
        "a: 2026-13-45\n",  # the timestamp constructor raises: the full loader reports it
        "x" * 200 + ": long key\n",
    ],
)
def test_anything_else_goes_to_the_full_loader(text: str) -> None:
    assert _simple_header(text) is None


_ATOM = st.sampled_from(
    [
        "a", "status", "blocked", "x y", "1", "0x1F", "1_000", "-1", ".5", "1e3", ".nan", "yes",
        "No", "~", "null", "2026-08-21", "=", "<<", "...", "'", '"', "#", " #", ":", ": ", "a:b",
        "[", "]", "{", "}", ",", "&a", "*a", "!x", "|", ">", "%", "@", "`", "?", "-", "\\", " ",
        "\t", "é", "it's", "x#y",
    ]
)  # fmt: skip
_SCALAR = st.one_of(
    _ATOM,
    _ATOM.map(lambda a: f'"{a}"'),
    _ATOM.map(lambda a: f"'{a}'"),
    st.lists(_ATOM, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
)
_LINE = st.one_of(
    st.tuples(st.sampled_from(["", " "]), _ATOM, st.sampled_from([":", ": ", " : "]), _SCALAR).map(
        "".join
    ),
    st.tuples(st.sampled_from(["- ", "  - ", "-"]), _SCALAR).map("".join),
    _ATOM.map(lambda a: "# " + a),
    st.just(""),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, max_size=6))
def test_fast_reader_never_disagrees(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    fast = _simple_header(text)
    if fast is not None:
        assert repr(fast) == repr(_full(text))
