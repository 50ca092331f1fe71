"""Asked again, and asked before: which earlier answers of the journal a block's question is
similar to.

Similar, precisely. Two questions are compared as hitl shows them in one line
(`Block.one_line_question(300)`, what the journal records as an answer's question):

1. Normalise (`normalise`): Unicode NFKC, case folded; markdown and code marks (`` ` * _ ~ # >``
   and `[`, `]`) and every other punctuation become spaces; whitespace runs collapse. Numbers
   stay, as words: "keep them 7 years" and "keep them 30 days" are different questions.
2. Tokens (`tokens`): the words of that, less a short list of English stop-words (articles,
   pronouns, auxiliaries, "should", "which", ...), each cut by a tiny suffix rule (`stem`:
   `deleting`, `deleted` and `delete` are one token, as are `invoices` and `invoice`), as a set.
3. Score (`score_tokens`): the mean of the Jaccard index |A∩B| / |A∪B| and the containment
   |A∩B| / min(|A|, |B|). Containment keeps a question re-asked with more words around it
   similar; Jaccard keeps a short question from matching every long one that contains its
   words. Questions that share fewer than two tokens score 0 (unless both are one token).
   When both name numbers and not the same ones, the score is halved: numbers carry what a
   question is specifically about ("step 3" is not "step 5", "01" is not "02").
4. Literals (`literals`): numbers with their sign, comparison operators and paths, read from
   the text before it is normalised (normalising drops the marks that tell `>= 2` from
   `<= 2`, `-1` from `1`, `./build` from `/build`). When both questions name numbers, or both
   operators, or both paths, and not the same ones, they score 0, equal words or not:
   numbers, operators and paths that differ make questions different (`literals_differ`).
   A kind only one of them names does not (a re-ask adds "/verify rejected B again").
   Two questions equal once normalised, with literals that do not differ, score 1.0.
5. Similar (`similar`): score >= THRESHOLD.

The same question (`same_question`, `question_groups`): two blocks whose one-line questions
are similar under this one rule, literals included. Asked again (`AnswerIndex`) uses it too;
the app's "mark the same question" and "by question", and `hitl answer --similar`, call
`same_question` and `question_groups`.

The threshold was measured on a labelled set of 60 question pairs, 31 similar and 29 not
(tests/data/similar_pairs.json: re-worded re-asks, the same block escalated again, agenticloop
tasks re-blocked under the same title, the same question in another project, and different
questions from the same repository or project, many sharing most of their words), by
`bench/similarity.py`:

    threshold  precision  recall  F1
    0.40       0.86       1.00    0.93
    0.45       0.91       0.97    0.94
    0.50       0.94       0.97    0.95
    0.55       0.97       0.94    0.95     <- chosen: precision first (a false "asked again"
    0.60       0.97       0.94    0.95        says an answer did not help when it did), and
    0.65       0.96       0.81    0.88        the lowest of the best F1 (more re-asks found)
    0.70       1.00       0.77    0.87

(bench/similarity.py's docstring says how plain Jaccard and containment fare, and what 0.55
gets wrong.)

The answer index (`AnswerIndex`) is built once from the journal's answers (kind "answer",
status done, not undone), newest first, each question tokenised once, with an inverted index
token -> answers, so that a block costs a few hundred comparisons at most, never one per
answer of a 90-day journal; `refresh` reads only the records written since. `hitl list` never
reads a journal record (its start-up must not grow with the history): it reads the memory of
the answers of the last two days (`recent-answers.json` in the state folder), which `hitl
answer`, `hitl undo` and the app write from the journal after each change. Untrusted input:
a journal entry's fields are cut to size and checked for type; a malformed one is skipped.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar

from hitl_tui.loops.literals import literals, literals_differ
from hitl_tui.model import Block

if TYPE_CHECKING:
    from hitl_tui.journal.entries import Entry

T = TypeVar("T")

#: Scores at or above this are similar (see the table above).
THRESHOLD = 0.55
#: An answer given at most this long before a block began, in the same repository, with a
#: similar question: the block is *asked again*.
WINDOW = timedelta(hours=24)
#: Characters of a question compared (the journal keeps 300; a hostile record may hold more).
MAX_CHARS = 1000
#: Tokens of a question looked up in the inverted index.
MAX_TOKENS = 64
#: Answers scored for one block, at most (per question, over every token's postings).
MAX_CANDIDATES = 400
#: Answers of one posting list looked at (the newest): a word in every question costs this.
MAX_POSTINGS = 300
#: Answers the index holds (the newest), whatever the journal keeps.
MAX_ENTRIES = 50_000

_STOP = """
    a an the and or but if then else of to in on at by for with from into onto as is are was
    were be been being am do does did done doing have has had having it its this that these
    those there here i me my we us our you your he she they them their what which who whom
    whose when where why how should shall would could can may might must will please now
    also just only so than too very not no yes any some all each either neither both
    about over under again still ok okay
"""
STOP_WORDS = frozenset(_STOP.split())

_MARKS = re.compile(r"[`*_~#>\[\]]+")
_NON_WORD = re.compile(r"[^\w]+")
_SUFFIXES = ("ing", "ed", "es", "s", "e")


def normalise(text: str) -> str:
    """`text` as compared: NFKC, case folded, marks and punctuation as spaces, one space."""
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS]).casefold()
    text = _MARKS.sub(" ", text)
    text = _NON_WORD.sub(" ", text).replace("_", " ")
    return " ".join(text.split())


def stem(word: str) -> str:
    """One suffix off (`-ing`, `-ed`, `-es`, `-s`, `-e`) when at least 3 letters stay."""
    if word.isdigit():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> frozenset[str]:
    """The set of stemmed words of `text` that are not stop-words."""
    return frozenset(stem(w) for w in normalise(text).split() if w not in STOP_WORDS)


def score_tokens(a: frozenset[str], b: frozenset[str]) -> float:
    """The mean of Jaccard and containment of two token sets; 0 when they share < 2 tokens."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    if common < 2 and not (common == 1 and len(a) == len(b) == 1):
        return 0.0
    jaccard = common / len(a | b)
    containment = common / min(len(a), len(b))
    value = (jaccard + containment) / 2
    numbers_a = {t for t in a if t.isdigit()}
    numbers_b = {t for t in b if t.isdigit()}
    if numbers_a and numbers_b and numbers_a != numbers_b:
        value /= 2  # both name numbers, not the same ones: step 3 is not step 5
    return value


def score(a: str, b: str) -> float:
    """How similar two questions are, 0 to 1 (1.0: equal once normalised and the same
    literals; 0: literals that differ)."""
    if literals_differ(literals(a), literals(b)):
        return 0.0
    na, nb = normalise(a), normalise(b)
    if na and na == nb:
        return 1.0
    return score_tokens(tokens(na), tokens(nb))


def similar(a: str, b: str, threshold: float = THRESHOLD) -> bool:
    return score(a, b) >= threshold


# -- the same question, between open blocks ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Asked:
    """A block's question as compared, computed once."""

    normal: str
    tokens: frozenset[str]
    literals: frozenset[str]
    kinds: tuple[frozenset[str], ...] = ()  # the literals by kind (`_KINDS`), compared apart


_KINDS, _NONE = ("num:", "op:", "path:"), frozenset[int]()
#: Questions as compared, by their one line and (`_RAW`: a string keeps its hash; the line made
#: again was 100 ms a grouping at 50,000 blocks) by the block's text the line is made of, if at
#: most `_RAW_LONGEST` (an ask's may be a megabyte, which would be kept after its block left).
_ASKED: dict[str, _Asked] = {}
_RAW: dict[str, _Asked] = {}
_ASKED_MAX, _RAW_LONGEST = 50_000, 1024


def _asked(block: Block) -> _Asked:
    if (found := _RAW.get(raw := block.summary or block.question)) is None:
        question = block.one_line_question(300)
        if (found := _ASKED.get(question)) is None:
            normal, marks = normalise(question), literals(question)
            kinds = tuple(frozenset(x for x in marks if x.startswith(k)) for k in _KINDS)
            found = _Asked(normal, tokens(normal), marks, kinds)
        for kept in (_ASKED, _RAW) if max(len(_ASKED), len(_RAW)) >= _ASKED_MAX else ():
            kept.clear()
        _ASKED[question] = found
        if len(raw) <= _RAW_LONGEST:
            _RAW[raw] = found
    return found


def read_question(block: Block) -> None:
    """Read `block`'s question as compared, and keep it (what `same_question` and
    `question_groups` would read first): the app reads them ahead, in a thread."""
    _asked(block)


def _same(a: _Asked, b: _Asked, threshold: float = THRESHOLD) -> bool:
    if not a.normal or not b.normal or literals_differ(a.literals, b.literals):
        return False
    if a.normal == b.normal:
        return True
    return score_tokens(a.tokens, b.tokens) >= threshold


def same_question(a: Block, b: Block) -> bool:
    """Whether two blocks ask the same question, whatever their repository or source: their
    one-line questions (`Block.one_line_question(300)`, what the journal records) are similar
    (`score` >= THRESHOLD), and numbers, operators and paths that both name do not differ
    (`>= 2` is not `<= 2`, `-1` not `1`, `./build` not `/build`). The one rule of "the same
    question": the app's mark-the-same-question and by-question grouping, `hitl answer
    --similar`, and asked again (`AnswerIndex`) all use it. A block with no words to compare
    asks nothing the same as another. Symmetric; not transitive (see `question_groups`)."""
    return _same(_asked(a), _asked(b))


#: Blocks of one question-group candidate list that are scored, at most, per block.
GROUP_CANDIDATES = 400


def question_groups(blocks: Iterable[Block]) -> list[list[Block]]:
    """The groups of two or more blocks asking the same question (`same_question`), each in
    the order given, the groups in the order of their first block. A block is in one group at
    most: each block joins the group of the first earlier block ("the group's question",
    its first) it asks the same question as, else it begins a group (so a group's every
    block asks the same question as its first; no chain of near ones drifts). Blocks equal
    once normalised are grouped at once; the others only with the groups' first blocks that
    share two words with them (an inverted index, counted in C): 5,000 blocks group in about
    50 ms once their questions are read and kept, 110 ms the first time (test_similar.py).
    At most GROUP_CANDIDATES groups are compared, and a word's first MAX_POSTINGS groups."""
    firsts: list[_Asked] = []
    members: list[list[Block]] = []
    exact: dict[tuple[str, frozenset[str]], int] = {}
    postings: dict[str, list[int]] = {}
    # The groups whose first names no literal of a kind, and those naming each set of them.
    lacks: list[set[int]] = [set() for _ in _KINDS]
    has: list[dict[frozenset[str], set[int]]] = [{} for _ in _KINDS]
    for block in blocks:
        asked = _asked(block)
        if not asked.normal:
            continue
        at = exact.get((asked.normal, asked.literals))
        if at is None:
            at = _first_same(asked, firsts, postings, lacks, has)
        if at is None:
            at = len(firsts)
            firsts.append(asked)
            members.append([])
            for token in asked.tokens:
                postings.setdefault(token, []).append(at)
            for kind, marks in enumerate(asked.kinds):
                if marks:
                    has[kind].setdefault(marks, set()).add(at)
                else:
                    lacks[kind].add(at)
        exact.setdefault((asked.normal, asked.literals), at)
        members[at].append(block)
    return [group for group in members if len(group) > 1]


def _first_same(
    asked: _Asked,
    firsts: list[_Asked],
    postings: dict[str, list[int]],
    lacks: list[set[int]],
    has: list[dict[frozenset[str], set[int]]],
) -> int | None:
    """The earliest group whose first block asks the same question as `asked` (None: none),
    among the first GROUP_CANDIDATES sharing two words; those whose literals differ are left
    out by set first (`lacks`, `has`: at 50,000 blocks whose questions differ by a number, a
    block was compared with hundreds, 2 s in all). None can match: the words are not counted."""
    for kind, marks in enumerate(asked.kinds):
        if marks and not lacks[kind] and marks not in has[kind]:
            return None
    # Counted in C (Counter over the chained postings): the groups sharing a word.
    counts = Counter(chain.from_iterable(postings.get(t, ())[:MAX_POSTINGS] for t in asked.tokens))
    mine = len(asked.tokens)
    lone = mine == 1
    pool: set[int] | frozenset[int] = set(counts)  # (all of them under the cap)
    if len(counts) > GROUP_CANDIDATES:
        pool = set(sorted(at for at, n in counts.items() if n >= 2 or lone)[:GROUP_CANDIDATES])
    for kind, marks in enumerate(asked.kinds):
        if marks and pool:
            pool = (pool & lacks[kind]) | (pool & has[kind].get(marks, _NONE))
    for at in sorted(pool):  # by the count of shared words first, then whole
        common = counts[at]
        theirs = len(firsts[at].tokens)
        if common < 2 and not (mine == theirs == 1):
            continue
        if (common / (mine + theirs - common) + common / min(mine, theirs)) / 2 < THRESHOLD:
            continue
        if _same(asked, firsts[at]):
            return at
    return None


# -- the answers of the journal ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Earlier:
    """An earlier answer to a similar question: what it said, where and when, and what
    reusing it needs (the choice's key and option, or the operator's texts)."""

    entry: str
    time: datetime
    repo: str
    repo_name: str
    block_id: str
    question: str
    #: What was answered, one line (`B) Keep invoices — ...`, or the operator's words).
    answered: str
    choice_key: str | None
    choice_option: str | None
    texts: tuple[str, ...]
    note: str | None
    score: float
    same_repo: bool

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "time": self.time.isoformat(), "answered": self.answered}


@dataclass(frozen=True, slots=True)
class _Item:
    entry: str
    time: datetime
    repo: str
    block_id: str
    fingerprint: str
    question: str
    normal: str
    tokens: frozenset[str]
    literals: frozenset[str]
    answered: str
    choice_key: str | None
    choice_option: str | None
    texts: tuple[str, ...]
    note: str | None


def _text(value: object, limit: int = MAX_CHARS) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _item(entry: Entry) -> _Item | None:
    """An index item from a journal Entry, or None when it is no usable answer."""
    try:
        if entry.kind != "answer" or entry.status != "done" or entry.undone:
            return None
        if not isinstance(entry.time, datetime) or entry.time.tzinfo is None:
            return None
        question = _text(entry.question)
        normal = normalise(question)
        if not normal:
            return None
        answer = entry.answer if isinstance(entry.answer, dict) else {}
        worded = answer.get("choice") or answer.get("texts") or answer.get("decision_override")
        if answer.get("note") and not worded:
            return None  # a note that kept the block open (`w`, `hitl note`): no answer
        choice = answer.get("choice")
        key = option = None
        if isinstance(choice, dict):
            key = _text(choice.get("key"), 40) or None
            option = _text(choice.get("option"), MAX_CHARS) or None
        raw_texts = answer.get("texts")
        texts: tuple[str, ...] = ()
        if isinstance(raw_texts, list):
            texts = tuple(_text(t, 20_000) for t in raw_texts[:20] if isinstance(t, str))
        note = _text(answer.get("note"), 20_000) or None
        return _Item(
            entry=_text(entry.id, 100),
            time=entry.time,
            repo=_repo_text(entry.repo),
            block_id=_text(entry.block_id, 300),
            fingerprint=_text(entry.block_fingerprint, 200),
            question=question,
            normal=normal,
            tokens=tokens(normal),
            literals=literals(question),
            answered=" ".join(_text(entry.answered).split()),
            choice_key=key,
            choice_option=option,
            texts=texts,
            note=note,
        )
    except (AttributeError, TypeError, ValueError):
        return None


def _repo_text(repo: object) -> str:
    return os.fsdecode(repo) if isinstance(repo, os.PathLike) else str(repo)


# -- the recent answers, kept beside the journal for `hitl list` -------------------------------

#: The memory of the answers of the last RECENT (state folder): `hitl list` reads this, never a
#: journal record (its start-up does not grow with the journal's history).
RECENT_NAME = "recent-answers.json"
RECENT_FORMAT = 1
#: Answers kept in the memory: those of this long before it was written (a day for a block to
#: come back, a day for it to stay listed).
RECENT = 2 * WINDOW
#: Rows kept, at most (the newest), and the size of a memory file that is read.
RECENT_ROWS = 5_000
RECENT_BYTES = 16 << 20


def _row(item: _Item) -> dict[str, Any]:
    return {
        "entry": item.entry,
        "time": item.time.isoformat(),
        "repo": item.repo,
        "block": item.block_id,
        "fingerprint": item.fingerprint,
        "question": item.question,
        "answered": item.answered,
        "choice": [item.choice_key, item.choice_option],
        "texts": list(item.texts),
        "note": item.note,
    }


def _from_row(row: object) -> _Item | None:
    """An index item from a memory row; None when the row is not one (untrusted file)."""
    if not isinstance(row, dict):
        return None
    try:
        when = datetime.fromisoformat(row["time"])
    except (KeyError, TypeError, ValueError):
        return None
    choice = row.get("choice")
    key, option = choice if isinstance(choice, list) and len(choice) == 2 else (None, None)
    texts = row.get("texts")
    question = _text(row.get("question"))
    normal = normalise(question)
    entry = _text(row.get("entry"), 100)
    if when.tzinfo is None or not normal or not entry:
        return None
    return _Item(
        entry=entry,
        time=when,
        repo=_text(row.get("repo"), 4096),
        block_id=_text(row.get("block"), 300),
        fingerprint=_text(row.get("fingerprint"), 200),
        question=question,
        normal=normal,
        tokens=tokens(normal),
        literals=literals(question),
        answered=" ".join(_text(row.get("answered")).split()),
        choice_key=_text(key, 40) or None,
        choice_option=_text(option) or None,
        texts=tuple(_text(t, 20_000) for t in texts[:20] if isinstance(t, str))
        if isinstance(texts, list)
        else (),
        note=_text(row.get("note"), 20_000) or None,
    )


def save_recent(index: AnswerIndex, now: datetime, stamp: tuple[Any, ...] | None) -> None:
    """Write the memory of the recent answers from `index` (read from the journal as it was at
    `stamp`). Never a reason for a command to fail: a state folder that cannot take it is
    left as it is."""
    from hitl_tui.state import files as statefile

    path = statefile.in_state(RECENT_NAME)
    if path is None:
        return
    with index._lock:
        recent = [
            _row(item)
            for item in index._order(list(range(len(index._items))))
            if item.time >= now - RECENT
        ][:RECENT_ROWS]
    try:
        with statefile.locked(path):
            statefile.write(
                path,
                {"format": RECENT_FORMAT, "journal": list(stamp or ()), "answers": recent[::-1]},
            )
    except OSError:
        pass


def remember_recent(now: datetime) -> None:
    """Read the journal's answers of the last RECENT and keep them in the memory: after an
    answer or an undo by a command (`hitl answer`, `hitl undo`)."""
    stamp = journal_stamp()
    save_recent(AnswerIndex.from_journal(since=now - RECENT), now, stamp)


def recent_index(**kwargs: Any) -> AnswerIndex:
    """The recent answers from the memory alone (no journal record is read); an index with
    none when there is no memory, or one that cannot be read."""
    from hitl_tui.state import files as statefile

    index = AnswerIndex(**kwargs)
    path = statefile.in_state(RECENT_NAME)
    if path is None:
        return index
    try:
        loaded = statefile.read(path, RECENT_FORMAT, RECENT_BYTES)
    except statefile.Unusable:
        return index
    rows = loaded.get("answers")
    if not isinstance(rows, list):
        return index
    with index._lock:
        for row in rows[-RECENT_ROWS:]:
            item = _from_row(row)
            if item is not None and item.entry not in index._ids:
                index._put(item)
        index._changed()
    return index


def journal_stamp() -> tuple[int, int, int] | None:
    """(inode, size, mtime) of the journal's active file: when it changes, `refresh` has
    something to read (None: no journal yet)."""
    from hitl_tui.journal import store as journalstore

    try:
        st = os.stat(journalstore.active_file())
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _name(repo: str) -> str:
    return repo.rstrip("/").rsplit("/", 1)[-1] or repo


class AnswerIndex:
    """The journal's answers, newest first, tokenised once, with an inverted index.

    Thread-safe: the app builds and refreshes it in a worker thread and reads it on the UI
    thread. Results are memoised per (index version, block fingerprint)."""

    def __init__(self, threshold: float = THRESHOLD, window: timedelta = WINDOW) -> None:
        self.threshold = threshold
        self.window = window
        self._lock = threading.RLock()
        #: Oldest first (appended as they come); `_order` walks it backwards.
        self._items: list[_Item | None] = []
        self._ids: dict[str, int] = {}
        self._postings: dict[str, list[int]] = {}
        self._by_repo: dict[str, list[int]] = {}
        #: The newest journal entry read (any kind), and entries read while still open.
        self._newest: str | None = None
        self._pending: set[str] = set()
        #: Bumped at every change: memoised answers of an older version are stale.
        self.version = 0
        self._memo: dict[tuple[Any, ...], Any] = {}

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_journal(cls, since: datetime | None = None, **kwargs: Any) -> AnswerIndex:
        """Every answer of the journal (`since`: only those given at or after it: the reading
        stops there, newest first)."""
        index = cls(**kwargs)
        index.refresh(since=since)
        return index

    @classmethod
    def from_entries(cls, entries: Iterable[Entry], **kwargs: Any) -> AnswerIndex:
        """From journal Entries in any order (tests, and callers that hold them already)."""
        index = cls(**kwargs)
        found = [e for e in entries if _item(e) is not None]
        for entry in sorted(found, key=lambda e: e.time):
            index.add(entry)
        return index

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    def add(self, entry: Entry) -> bool:
        """Index one new answer (a journal Entry); False when it is none (not a done answer,
        undone, malformed) or already indexed."""
        item = _item(entry)
        if item is None:
            return False
        with self._lock:
            if item.entry in self._ids:
                return False
            self._put(item)
            self._changed()
        return True

    def _put(self, item: _Item) -> None:
        at = len(self._items)
        self._items.append(item)
        self._ids[item.entry] = at
        self._by_repo.setdefault(item.repo, []).append(at)
        for token in item.tokens:
            self._postings.setdefault(token, []).append(at)
        if len(self._ids) > MAX_ENTRIES:
            oldest = next(i for i, it in enumerate(self._items) if it is not None)
            self._drop_at(oldest)

    def remove(self, entry_id: str) -> bool:
        """Take an answer out (it was undone)."""
        with self._lock:
            at = self._ids.get(entry_id)
            if at is None:
                return False
            self._drop_at(at)
            self._changed()
            return True

    def _drop_at(self, at: int) -> None:
        item = self._items[at]
        if item is None:
            return
        self._items[at] = None
        del self._ids[item.entry]
        # The postings keep the index: lookups skip the None (no list is rewritten).

    def _changed(self) -> None:
        self.version += 1
        self._memo.clear()

    def refresh(self, since: datetime | None = None) -> int:
        """Read the journal's records written since the last read (all of them the first
        time, back to `since` when given): new answers are added, undone ones removed. The
        number of changes is returned. The journal is read without holding the index's lock
        (the UI thread asks it meanwhile); what was read is applied under it."""
        from hitl_tui.journal import newest_first

        with self._lock:
            stop, pending, known = self._newest, set(self._pending), self._newest is not None
        found = []
        newest = None
        try:
            for entry in newest_first(include_undos=True):
                if newest is None:
                    newest = entry.id
                if entry.id == stop:
                    stop = None
                if known and stop is None and not pending:
                    break
                pending.discard(entry.id)
                if since is not None and entry.time < since:
                    break
                found.append(entry)
                if len(found) > MAX_ENTRIES * 2:
                    break
        except (OSError, ValueError):
            pass  # a journal that cannot be read: what was indexed stays
        with self._lock:
            changes = 0
            still_open = set()
            for entry in reversed(found):  # oldest first: an undo after what it undid
                if entry.status == "in progress":
                    still_open.add(entry.id)
                elif entry.kind == "undo":
                    at = self._ids.get(entry.undoes) if isinstance(entry.undoes, str) else None
                    if entry.status == "done" and at is not None:
                        self._drop_at(at)
                        changes += 1
                else:
                    item = _item(entry)
                    if item is not None and item.entry not in self._ids:
                        self._put(item)
                        changes += 1
            self._pending = still_open
            if newest is not None:
                self._newest = newest
            if changes:
                self._changed()
            return changes

    # -- asking ----------------------------------------------------------------------------

    def _order(self, positions: list[int]) -> Iterator[_Item]:
        """Items at `positions` (oldest first as stored), newest first, skipping removed."""
        for at in reversed(positions):
            item = self._items[at]
            if item is not None:
                yield item

    def asked_again(self, block: Block) -> Earlier | None:
        """The newest answer, in the block's repository, given before the block began and at
        most WINDOW before it, with a similar question: the loop asked again what it was told
        (its file may hold the very bytes answered). None when there is none."""
        return self._memoised(("again", block.source, str(block.path)), block, self._again)

    def _again(self, block: Block) -> Earlier | None:
        repo = _repo_text(block.repo)
        question = block.one_line_question(300)
        normal = normalise(question)
        mine = tokens(normal)
        marks = literals(question)
        earliest = block.since - self.window
        looked = 0
        for item in self._order(self._by_repo.get(repo, [])):
            # An answer given after the block began answered it (or another): not asked
            # again. The same bytes again after the answer are: the loop wrote its question
            # anew, word for word.
            if item.time > block.since:
                continue
            if item.time < earliest:
                break  # newest first: every item after this one is older still
            looked += 1
            if looked > MAX_CANDIDATES:
                break
            if literals_differ(marks, item.literals):
                continue
            value = 1.0 if item.normal == normal else score_tokens(mine, item.tokens)
            if value >= self.threshold:
                return _earlier(item, value, True)
        return None

    def earlier(self, block: Block, limit: int = 3) -> list[Earlier]:
        """Up to `limit` earlier answers to similar questions: the block's repository first,
        then the others; the best score first within each, then the newest. An answer that
        said the same thing in the same repository as one listed already is left out."""
        found = self._memoised(("earlier", block.source, str(block.path)), block, self._earlier)
        return found[:limit]

    def _earlier(self, block: Block) -> list[Earlier]:
        repo = _repo_text(block.repo)
        question = block.one_line_question(300)
        normal = normalise(question)
        mine = tokens(normal)
        marks = literals(question)
        counts: dict[int, int] = {}
        for token in list(mine)[:MAX_TOKENS]:
            posting = self._postings.get(token, ())
            for at in posting[-MAX_POSTINGS:]:
                counts[at] = counts.get(at, 0) + 1
        # The answers sharing the most tokens (newest first on ties) are scored.
        best = sorted(counts, key=lambda at: (-counts[at], -at))[:MAX_CANDIDATES]
        scored = []
        for at in best:
            item = self._items[at]
            if item is None:
                continue
            if item.fingerprint == block.fingerprint and item.time > block.since:
                continue  # the answer of this very block (still listed a moment)
            if literals_differ(marks, item.literals):
                continue
            value = 1.0 if item.normal == normal else score_tokens(mine, item.tokens)
            if value >= self.threshold:
                scored.append(_earlier(item, value, item.repo == repo))
        scored.sort(key=lambda e: (not e.same_repo, -e.score, -e.time.timestamp()))
        shown, said = [], set()
        for earlier in scored:
            what = (earlier.repo, normalise(earlier.answered))
            if what in said:
                continue
            said.add(what)
            shown.append(earlier)
            if len(shown) == 9:
                break
        return shown

    def _memoised(self, kind: tuple[Any, ...], block: Block, compute: Callable[[Block], T]) -> T:
        with self._lock:
            key = (*kind, block.fingerprint, block.since, self.version)
            if key in self._memo:
                cached: T = self._memo[key]
                return cached
            value = compute(block)
            if len(self._memo) > 20_000:
                self._memo.clear()
            self._memo[key] = value
            return value


def _earlier(item: _Item, value: float, same_repo: bool) -> Earlier:
    return Earlier(
        entry=item.entry,
        time=item.time,
        repo=item.repo,
        repo_name=_name(item.repo),
        block_id=item.block_id,
        question=item.question,
        answered=item.answered,
        choice_key=item.choice_key,
        choice_option=item.choice_option,
        texts=item.texts,
        note=item.note,
        score=round(value, 3),
        same_repo=same_repo,
    )
