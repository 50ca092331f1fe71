"""The literals of a question: its numbers (with their sign), comparison operators and paths,
read from the text as written (normalising, `similarity.normalise`, drops the marks that tell
`>= 2` from `<= 2`, `-1` from `1`, `./build` from `/build`). `similarity` uses them: numbers,
operators and paths that two questions both name, and that differ, make them different
questions (`literals_differ`).

A leaf: it imports nothing of hitl.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["literals", "literals_differ"]

#: Characters of a question read (as `similarity.MAX_CHARS`).
MAX_CHARS = 1000

#: A number, with its sign when one stands before it (not a dash inside a word: `step-3`).
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?\d+(?:[.,]\d+)*|\d+(?:[.,]\d+)*")
#: A comparison operator between two operands (`x >= 2`, `a!=b`); an arrow is none.
_OPERATOR = re.compile(
    r"(?<=[\w)\]`'\"])\s*(===|!==|==|!=|>=|<=|=>|->|<-|[<>=\u2264\u2265\u2260])\s*"
    r"(?=[\w(\[`'\"+\-.~/\u2212])"
)
#: A path: a word with a slash in it, or one beginning with `/`, `./`, `../` or `~/`.
#: It begins only where no path character stands before it: each run of them is scanned once
#: (a 1,000-digit question took 8 ms, one start per digit).
_PATH = re.compile(r"(?<![\w.\-/~])(?:(?:~|\.{1,2})?/[\w.\-/~]*|[\w.\-~]+/[\w.\-/~]*)")
_ANY_LITERAL = re.compile(r"[\d/<>=\u2264\u2265\u2260]")
_ARROWS = frozenset({"=>", "->", "<-"})


def literals(text: str) -> frozenset[str]:
    """The numbers (with their sign), comparison operators and paths of `text`, as written
    (NFKC, case folded): `"Is >= 2 ok for ./build?"` gives `{">=", "2", "./build"}`. Two
    questions whose literals differ are different questions."""
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS]).casefold()
    if not _ANY_LITERAL.search(text):
        return frozenset()
    found: set[str] = set()
    for match in _PATH.finditer(text):
        path = match.group().rstrip(".")
        if path.strip("/.~"):  # a lone "/" or "./" is punctuation, not a path
            found.add("path:" + path)
    rest = _PATH.sub(" ", text)
    for match in _OPERATOR.finditer(rest):
        if match.group(1) not in _ARROWS:
            found.add("op:" + match.group(1))
    for match in _NUMBER.finditer(rest):
        number = match.group().replace("\u2212", "-").lstrip("+")
        found.add("num:" + number)
    return frozenset(found)


def literals_differ(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two questions' `literals` make them different questions: of a kind (numbers,
    operators, paths) that both name, not the same ones."""
    if a == b:
        return False
    for kind in ("num:", "op:", "path:"):
        mine = {x for x in a if x.startswith(kind)}
        theirs = {x for x in b if x.startswith(kind)}
        if mine and theirs and mine != theirs:
            return True
    return False
