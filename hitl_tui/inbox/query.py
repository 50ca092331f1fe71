"""The filter an operator types (`/` in the app, `hitl list --filter`): which blocks to list.

```
ruff shop                 both words, anywhere (id, repo, title, question, category, state,
                          source), ignoring case
repo:shop  cat:creds      a word in one field: repo, cat (category), state, src (source), id
age:>1h  age:<15m         blocked longer / shorter than a duration (`age:1h` is `age:>1h`)
-cat:credentials  !ruff   a leading - or ! excludes what the term matches
"two words"               a phrase, quotes kept out of it
```

Terms are ANDed. The query is parsed once per keystroke; matching runs once per block, against
a lower-cased text of its fields that `Haystacks` keeps per block (built when the block first
is filtered or changes, not at every keystroke). A term that is not complete yet (`age:>` while
typing) is reported in `problems` and left out; one that names an unknown field (`http://x`,
`Needed:`) is looked for as a word, and reported too. The app shows the problem; the CLI
refuses a query with one.

Domain code: no Textual.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hitl_tui.model import Block
from hitl_tui.timefmt import parse_duration

#: The fields a term may name, with their short forms, and what each reads of a block.
FIELDS: dict[str, Callable[[Block], str]] = {
    "repo": lambda b: b.repo_name,
    "cat": lambda b: b.category or "",
    "state": lambda b: b.state,
    "src": lambda b: b.source,
    "id": lambda b: b.id,
    "title": lambda b: b.title or "",
}
ALIASES = {"category": "cat", "source": "src", "status": "state"}
#: Every field name a term may use, for the message about an unknown one.
FIELD_NAMES = (*FIELDS, "age")

_TOKEN = re.compile(
    r'(?P<neg>[-!]?)(?:(?P<field>[A-Za-z_]+):)?(?:"(?P<phrase>[^"]*)"?|(?P<word>\S*))'
)
_AGE = re.compile(r"\s*([<>]=?|=)?\s*(.*)\Z")


@dataclass(frozen=True)
class Term:
    """One term: a word (`field` None: anywhere) or a field's word, or an age bound."""

    text: str
    field: str | None = None
    negated: bool = False
    #: For `age:`: at least (`>`) or at most (`<`) this long.
    longer: timedelta | None = None
    shorter: timedelta | None = None

    def matches(self, block: Block, hay: str, now: datetime) -> bool:
        if self.field == "age":
            waited = now - block.since
            found = (self.longer is None or waited >= self.longer) and (
                self.shorter is None or waited <= self.shorter
            )
        elif self.field is None:
            found = self.text in hay
        else:
            found = self.text in FIELDS[self.field](block).casefold()
        return found != self.negated


@dataclass(frozen=True)
class Query:
    """A parsed filter. `Query.parse("")` matches every block."""

    text: str = ""
    terms: tuple[Term, ...] = ()
    #: Terms left out, each with why (shown by the app; the CLI refuses the query).
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def empty(self) -> bool:
        return not self.terms

    @classmethod
    def parse(cls, text: str) -> Query:
        terms: list[Term] = []
        problems: list[str] = []
        for m in _TOKEN.finditer(text):
            if not m.group(0).strip():
                continue
            negated = bool(m.group("neg"))
            name = m.group("field")
            value = m.group("phrase") if m.group("phrase") is not None else m.group("word")
            if name is not None:
                key = ALIASES.get(name.lower(), name.lower())
                if key == "age":
                    term = _age_term(value, negated, problems)
                    if term is not None:
                        terms.append(term)
                    continue
                if key not in FIELDS:
                    # A URL or `Needed:` is more likely than a typo: look for it as a word.
                    names = ", ".join(f"{f}:" for f in FIELD_NAMES)
                    problems.append(
                        f"no field {name!r}: looked for as a word "
                        f"(quote it to say so; fields: {names})"
                    )
                    word = m.group(0)[len(m.group("neg")) :]
                    terms.append(Term(word.strip('"').casefold(), None, negated))
                    continue
                if not value:
                    continue  # `repo:` while typing
                terms.append(Term(value.casefold(), key, negated))
            elif value:
                terms.append(Term(value.casefold(), None, negated))
        return cls(text, tuple(terms), tuple(problems))

    def narrows(self, before: Query) -> bool:
        """Whether every block this query matches is one `before` matched too (a keystroke that
        only made a word longer, or added a word): the list can be filtered from what `before`
        listed instead of from every block."""
        if len(self.terms) < len(before.terms):
            return False
        for old, new in zip(before.terms, self.terms, strict=False):
            if old == new:
                continue
            if "age" in (old.field, new.field) or old.negated or new.negated:
                return False
            if old.field != new.field or old.text not in new.text:
                return False
        return True

    def words(self) -> tuple[str, ...] | None:
        """The texts of the terms when every one is a word looked for anywhere (no field, no
        age, not negated): `matches` is then `all(word in hay ...)`, which a filter pass runs
        in one comprehension per word. None otherwise."""
        if any(t.field is not None or t.negated for t in self.terms):
            return None
        return tuple(t.text for t in self.terms)

    def matches(self, block: Block, hay: str, now: datetime | None = None) -> bool:
        """Whether `block` (with `hay`, its `haystack`) passes every term."""
        if not self.terms:
            return True
        when = now or datetime.now(UTC)
        return all(term.matches(block, hay, when) for term in self.terms)


def _age_term(value: str, negated: bool, problems: list[str]) -> Term | None:
    m = _AGE.match(value)
    op, amount = (m.group(1) or ">", m.group(2)) if m else (">", value)
    if not amount:
        problems.append("age: wants a duration, like age:>1h or age:<15m")
        return None
    try:
        bound = parse_duration(amount)
    except ValueError as exc:
        problems.append(f"age: {exc}")
        return None
    if op.startswith("<"):
        return Term(value, "age", negated, shorter=bound)
    if op == "=":
        return Term(value, "age", negated, longer=bound, shorter=bound + timedelta(minutes=1))
    return Term(value, "age", negated, longer=bound)


def category_note(
    query: Query, blocks: Iterable[Block], hint_of: Callable[[str], str | None]
) -> str | None:
    """One line for the filter's feedback when a `cat:` term matches none of `blocks` (the
    blocks the view chooses from) and some of them carry no category: how many, of which
    formats, and how a block of a format declares one (`hint_of(source)`, `Source.
    category_hint`): `cat: loopkit blocks carry no category unless BLOCKED.md says ... (3
    here)`. None otherwise (no such term, a block matches it, or every block has one)."""
    wanted = {t for t in query.terms if t.field == "cat" and not t.negated}
    if not wanted:
        return None
    found: set[Term] = set()
    bare: dict[str, int] = {}
    for block in blocks:
        if block.category is None:
            bare[block.source] = bare.get(block.source, 0) + 1
            continue
        category = block.category.casefold()
        found.update(t for t in wanted if t.text in category)
    if not bare or len(found) == len(wanted):
        return None
    # The formats whose blocks could declare one first: the line says how, then the rest.
    hinted = [(source, hint_of(source)) for source in sorted(bare)]
    said = [
        f"{source} blocks carry no category unless {hint} ({bare[source]} here)"
        for source, hint in hinted
        if hint
    ]
    rest = [source for source, hint in hinted if not hint]
    if rest:
        total = sum(bare[source] for source in rest)
        counts = ", ".join(f"{bare[source]} {source}" for source in rest)
        verb = "block carries" if total == 1 else "blocks carry"
        said.append(f"{counts} {verb} {'none either' if said else 'no category'}")
    return "cat: " + "; ".join(said)


def haystack(block: Block) -> str:
    """What a word without a field is looked for in: the block's fields, lower-cased."""
    parts = (
        block.id,
        block.repo_name,
        block.title or "",
        block.summary or "",
        block.question,
        block.category or "",
        block.state,
        block.source,
    )
    return "\n".join(parts).casefold()


class Haystacks:
    """Each block's `haystack`, kept by row until the block changes (a keystroke of the filter
    then costs one substring test per term and block, not the lower-casing of every field)."""

    def __init__(self) -> None:
        self._hay: dict[str, tuple[Block, str]] = {}
        #: The same texts alone, by row: what `texts` hands a filter pass.
        self._text: dict[str, str] = {}
        #: Whether `_text` covered every block `texts` was last given, none forgotten since.
        self._complete = False

    def of(self, row: str, block: Block) -> str:
        kept = self._hay.get(row)
        if kept is not None and kept[0] is block:
            return kept[1]
        hay = haystack(block)
        self._hay[row] = (block, hay)
        self._text[row] = hay
        return hay

    def forget(self, row: str) -> None:
        """The block of `row` changed, came or went (`texts` looks for what it lacks again)."""
        self._hay.pop(row, None)
        self._text.pop(row, None)
        self._complete = False

    def texts(self, blocks: Mapping[str, Block]) -> dict[str, str]:
        """Each of `blocks`' haystack by row (made for those that have none yet), to look up
        without a call per block. Its caller forgets a row whenever that row's block changes
        or a row is added (`of` would notice a change, this does not look)."""
        text = self._text
        if not self._complete:
            for row in blocks.keys() - text.keys():
                self.of(row, blocks[row])
            self._complete = True
        return text
