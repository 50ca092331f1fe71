"""A parsed Block as plain JSON data and back: the codec of the parse cache's shards.

`freeze` takes a Block apart into a list of its fields (in the dataclass's order; the repo and
path are left out, they are the cache's key), with its `meta` encoded for JSON once, beside
it; `to_json` is the row as written; `dumps` and `loads` are the shard's bytes (orjson when it
can carry them exactly, else the stdlib's json); `untag` restores the tagged values of a `meta`
read back; `thaw` puts a Block together again. A shard may have been tampered with, so nothing
is trusted: the decoders' nesting is bounded, dict keys and set members are scalars of bounded
hash, and every field's type is checked before it becomes a Block (anything else is a
ValueError, which the cache treats as a miss). A value JSON could not carry exactly raises
Uncacheable on the way in.

orjson refuses ints beyond 64 bits and strings that are not UTF-8 (a path of undecodable
bytes, kept by surrogateescape), writes NaN as null and reads an int beyond 64 bits as a float.
So a shard orjson cannot write is written by json (its ints exact, its surrogates escaped), a
non-finite float is tagged, and a shard is read by orjson only if orjson wrote it (its
`codec`); any other is read by json.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import operator
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from hitl_tui.model import Block, Choice, Section

try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; json alone is exact, only slower
    orjson = None  # type: ignore[assignment]

#: Python's ints hash modulo 2**61 - 1: a set of multiples of it would take quadratic time to
#: build. Keys and set members beyond this are refused (no YAML header needs them).
MAX_KEY_INT = (1 << 61) - 2
#: json refuses to write ints of more than 4,300 digits.
MAX_INT_BITS = 14_000

_FIELDS = tuple(f.name for f in dataclasses.fields(Block))
_INDEX = {name: i for i, name in enumerate(_FIELDS)}
_STR = tuple(_INDEX[n] for n in ("id", "source", "state", "question", "context", "fingerprint"))
_STR += (_INDEX["raw"],)
_OPTIONAL_STR = tuple(_INDEX[n] for n in ("category", "title", "summary"))
_STR_LISTS = tuple(_INDEX[n] for n in ("attempted", "problems", "questions", "notes"))
_LENGTH = len(_FIELDS)
_CHOICES, _EXTRA, _SINCE = _INDEX["choices"], _INDEX["extra"], _INDEX["since"]
_TRUNCATED, _META = _INDEX["truncated"], _INDEX["meta"]
_REPO, _PATH = _INDEX["repo"], _INDEX["path"]
_DEFAULTS, _ANSWERABLE = _INDEX["defaults"], _INDEX["answerable"]
_get_str = operator.itemgetter(*_STR)
_get_optional = operator.itemgetter(*_OPTIONAL_STR)
_get_lists = operator.itemgetter(*_STR_LISTS)
#: Each field's slot setter, in order (what `object.__setattr__` finds by name, found once).
_SETTERS = tuple(getattr(Block, name).__set__ for name in _FIELDS)


#: Choices already made by `thaw`, by their fields (frozen, so one object can serve many
#: blocks); emptied when it holds MAX_MEMO.
_CHOICE_MEMO: dict[tuple[Any, ...], Choice] = {}
MAX_MEMO = 4096
#: The few texts that repeat across a fleet's blocks (source, state, category), one object
#: each (`_shared`), as the choices are; emptied when it holds MAX_MEMO.
_TEXT_MEMO: dict[str, str] = {}
_SHARED = tuple(_INDEX[n] for n in ("source", "state", "category"))


class Uncacheable(Exception):
    """A value the cache cannot store exactly (the block is parsed afresh each time instead)."""


#: What `dumps` writes as the shard's `codec` when orjson wrote it (see `loads`).
ORJSON = "orjson"


def freeze(block: Block) -> list[Any]:
    """A Block's fields as plain data, its `meta` as it is, and after them the `meta` encoded
    for JSON (what `to_json` writes). Raises Uncacheable for a value the file could not carry
    exactly."""
    state = [getattr(block, name) for name in _FIELDS]
    state[_INDEX["repo"]] = state[_INDEX["path"]] = None
    for i in _STR_LISTS:
        state[i] = list(state[i])
    state[_INDEX["choices"]] = [
        [c.key, c.option, c.consequence, c.needs_text, c.kind] for c in block.choices
    ]
    state[_DEFAULTS] = list(block.defaults)
    state[_INDEX["extra"]] = [[s.title, s.body] for s in block.extra]
    state[_INDEX["since"]] = block.since.isoformat()
    state.append(_encode(block.meta))  # encoded once, now: fails here if it cannot be
    return state


def to_json(state: list[Any]) -> list[Any]:
    """A frozen block as it is written to disk: its fields, its `meta` encoded for JSON.
    Its texts are `unshared`: the block's own stay as they are when the shard is written."""
    if len(state) == _LENGTH:  # read from disk: encode it again
        row = list(state)
        row[_META] = _encode(state[_META])
    else:
        row = state[:_LENGTH]
        row[_META] = state[_LENGTH]
    for i, value in enumerate(row):
        if type(value) is str:
            if not value.isascii():
                row[i] = unshared(value)
        elif type(value) is list and i != _META:  # (the meta's texts: `_encode`'s)
            row[i] = _unshared_all(value)
    return row


def unshared(text: str) -> str:
    """`text` itself when it is ASCII, else an equal str of its own (a copy).

    orjson writes a str that is not ASCII from its UTF-8 form, which CPython then keeps
    inside the str for as long as it lives (`PyUnicode_AsUTF8AndSize`): a shard written from
    the blocks the app holds left a second copy of every such text in memory (at 50,000
    blocks, most of them with a `—` in their text or summary, 8 MB of small allocations made
    between the save's short-lived rows, which kept whole arenas of them from being freed).
    The copy, written and dropped with its row, takes that UTF-8 form with it."""
    if text.isascii() or len(text) < 2:
        return text
    return text[:1] + text[1:]  # (a new str: a concatenation of two non-empty ones)


def _unshared_all(items: list[Any]) -> list[Any]:
    """A list of a row (texts, or lists of texts and scalars: choices, sections) with its
    texts `unshared`; the list itself when every text in it is ASCII."""
    out = None
    for i, value in enumerate(items):
        if type(value) is str:
            if value.isascii():
                continue
            value = unshared(value)
        elif type(value) is list:
            new = _unshared_all(value)
            if new is value:
                continue
            value = new
        else:
            continue
        if out is None:
            out = list(items)
        out[i] = value
    return items if out is None else out


def dumps(document: dict[str, Any]) -> bytes:
    """A shard's bytes: orjson's when it can write them exactly (see the module's note)."""
    if orjson is not None:
        try:
            return orjson.dumps({**document, "codec": ORJSON})
        except (TypeError, ValueError):  # an int beyond 64 bits, a surrogate: json's turn
            pass
    return json.dumps(document).encode()


def dumps_rows(head: dict[str, Any], name: str, rows: Iterable[Any]) -> bytes | None:
    """`dumps({**head, name: list(rows)})`, byte for byte, each row encoded as it comes and
    dropped (a shard's rows as Python lists were some 20 MB beside its bytes at 50,000
    blocks); None when orjson is missing or cannot write a row (`dumps` then writes the shard
    whole, json's way). `head`'s keys are texts."""
    if orjson is None:
        return None
    encode = orjson.dumps
    parts = []
    try:
        for row in rows:
            parts.append(encode(row))
        out = [b"{"]
        for key, value in head.items():
            out += [encode(key), b":", encode(value), b","]
    except (TypeError, ValueError):
        return None
    out += [encode(name), b":[", b",".join(parts), b"],", encode("codec"), b":"]
    out += [encode(ORJSON), b"}"]
    del parts
    return b"".join(out)


def loads(data: bytes | str) -> object:
    """A shard's JSON, tags left in place (`untag` restores a `meta`); raises on anything odd.

    orjson reads only what orjson wrote (exact); anything else is read by json."""
    if orjson is not None:
        try:
            loaded = orjson.loads(data)
        except ValueError:  # not orjson's (escaped surrogates, NaN), or not JSON at all
            pass
        else:
            if type(loaded) is dict and loaded.get("codec") == ORJSON:
                return loaded
    return json.loads(data)


def untag(value: object) -> object:
    """A `meta` as `loads` gave it, with every tagged value back to its type (inner values
    first, as json's object_hook would); raises on anything odd."""
    kind = type(value)
    if kind is dict:
        out = {}
        for k, v in value.items():  # type: ignore[attr-defined]
            t = type(v)
            out[k] = untag(v) if t is dict or t is list else v
        return _decoded(out) if "$" in out else out
    if kind is list:
        return [untag(v) if type(v) is dict or type(v) is list else v for v in value]  # type: ignore[attr-defined]
    return value


def thaw(state: object, repo: Path, path: Path) -> Block:
    """The Block `freeze` took apart, for `path` in `repo`; ValueError if it is not that.

    Every field's type is checked (the file may have been tampered with). This runs once per
    cached block at every start, so it is written for speed: no generators, no keyword call.
    """
    if type(state) is not list or len(state) not in (_LENGTH, _LENGTH + 1):
        raise ValueError("not a block")
    for value in _get_str(state):
        if type(value) is not str:
            raise ValueError("a text field")
    for value in _get_optional(state):
        if value is not None and type(value) is not str:
            raise ValueError("an optional text field")
    lists = []
    for items in _get_lists(state):
        if type(items) is not list:
            raise ValueError("a list field")
        for x in items:
            if type(x) is not str:
                raise ValueError("a list field")
        lists.append(tuple(items))
    choices = []
    for c in state[_CHOICES]:
        if type(c) is not list or len(c) != 5:
            raise ValueError("choices")
        key, option, consequence, needs_text, kind = c
        if type(key) is not str or type(option) is not str or type(needs_text) is not bool:
            raise ValueError("choices")
        if consequence is not None and type(consequence) is not str:
            raise ValueError("choices")
        if kind is not None and type(kind) is not str:
            raise ValueError("choices")
        # A fleet's derived choices repeat from block to block: one frozen Choice each.
        memo = (key, option, consequence, needs_text, kind)
        choice = _CHOICE_MEMO.get(memo)
        if choice is None:
            if len(_CHOICE_MEMO) >= MAX_MEMO:
                _CHOICE_MEMO.clear()
            choice = _CHOICE_MEMO[memo] = Choice(key, option, consequence, needs_text, kind)
        choices.append(choice)
    defaults = state[_DEFAULTS]
    if type(defaults) is not list:
        raise ValueError("defaults")
    for d in defaults:
        if d is not None and type(d) is not str:
            raise ValueError("defaults")
    extra = []
    for x in state[_EXTRA]:
        if type(x) is not list or len(x) != 2 or type(x[0]) is not str or type(x[1]) is not str:
            raise ValueError("extra")
        extra.append(Section(x[0], x[1]))
    since = state[_SINCE]
    if type(since) is not str:
        raise ValueError("since")
    when = datetime.fromisoformat(since)
    if when.tzinfo is None:
        raise ValueError("since")
    if type(state[_TRUNCATED]) is not bool or type(state[_META]) is not dict:
        raise ValueError("truncated or meta")
    if type(state[_ANSWERABLE]) is not bool:
        raise ValueError("answerable")
    values = state[:_LENGTH]  # not the encoded meta after them
    for i in _SHARED:
        values[i] = _shared(values[i])
    values[_REPO] = repo
    values[_PATH] = path
    values[_SINCE] = when
    values[_CHOICES] = tuple(choices)
    values[_EXTRA] = tuple(extra)
    values[_DEFAULTS] = tuple(defaults)
    for i, value in zip(_STR_LISTS, lists, strict=True):
        values[i] = value
    block = object.__new__(Block)
    for put, value in zip(_SETTERS, values, strict=True):
        put(block, value)
    return block


def _shared(text: str | None) -> str | None:
    """One object for each of the few texts many blocks carry alike (an equal str)."""
    if text is None or len(text) > 64:
        return text
    found = _TEXT_MEMO.get(text)
    if found is None:
        if len(_TEXT_MEMO) >= MAX_MEMO:
            _TEXT_MEMO.clear()
        found = _TEXT_MEMO[text] = text
    return found


# -- values JSON has no word for ---------------------------------------------------------------
#
# A task's YAML header may hold dates, sets, bytes and keys that are not strings; the planner's
# facts hold tuples. Each is written as {"$": kind, "v": ...} and read back exactly.


def _encode(value: object) -> object:
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise Uncacheable("an int too long for JSON")
    if type(value) is str:
        return unshared(value)
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is float:
        # JSON has no NaN or infinity (json writes a token it alone reads, orjson null).
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if type(value) is list:
        return [_encode(v) for v in value]
    if type(value) is tuple:
        return {"$": "tuple", "v": [_encode(v) for v in value]}
    if type(value) is dict:
        if all(type(k) is str for k in value) and "$" not in value:
            return {unshared(k): _encode(v) for k, v in value.items()}
        return {"$": "dict", "v": [[_encode(_key(k)), _encode(v)] for k, v in value.items()]}
    if type(value) is datetime:
        return {"$": "datetime", "v": value.isoformat()}
    if type(value) is date:
        return {"$": "date", "v": value.isoformat()}
    if type(value) is set or type(value) is frozenset:
        return {"$": type(value).__name__, "v": [_encode(_key(v)) for v in value]}
    if type(value) is bytes:
        return {"$": "bytes", "v": base64.b64encode(value).decode("ascii")}
    raise Uncacheable(type(value).__name__)


def _decoded(obj: dict[str, Any]) -> object:
    """A tagged value back to its type (raises on anything odd)."""
    kind = obj.get("$")
    if kind is None:
        return obj
    v = obj["v"]
    if kind == "tuple":
        return tuple(v)
    if kind == "dict":
        return {_hashable(k): val for k, val in v}
    if kind == "datetime":
        return datetime.fromisoformat(v)
    if kind == "date":
        return date.fromisoformat(v)
    if kind == "set":
        return {_hashable(x) for x in v}
    if kind == "frozenset":
        return frozenset(_hashable(x) for x in v)
    if kind == "bytes":
        return base64.b64decode(v.encode("ascii"), validate=True)
    if kind == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    raise ValueError(f"unknown tag {kind!r}")


def _hashable(key: object) -> object:
    """A dict key or set member read back. Only scalars, and no int whose hash a planted file
    could make collide with thousands of others (see MAX_KEY_INT); a tuple key nested deep
    enough would overflow the C stack when hashed."""
    if type(key) is int and abs(key) > MAX_KEY_INT:
        raise ValueError("an int key out of range")
    if type(key) in (str, int, float, bool, date, datetime, bytes) or key is None:
        return key
    raise ValueError("a key that is not a scalar")


def _key(key: object) -> object:
    """_hashable, for writing: a key the reader would refuse is not cached at all."""
    try:
        return _hashable(key)
    except ValueError:
        raise Uncacheable("a key the cache does not keep") from None
