"""agenticloop's frontmatter reader, rule for rule (its `src/frontmatter.js`), in Python.

agenticloop does not read YAML. Its reader is a small indentation-based one, and what it makes of
a header is what the loop acts on, so hitl reads headers with the same rules:

- a line is `key: value` (the key may be quoted; `a:b` is key `a`, value `b`), a `- item` under
  a key whose value is empty, a full-line `# comment`, or blank; in the strict reader anything
  else is an invalid line (`invalid_yaml_line:N`), in the lenient one it is skipped;
- a value is text, never a number, boolean, null or date: `5` is `"5"`, `true` is `"true"`;
- a value quoted at both ends is taken literally: the quotes are stripped, nothing is escaped
  (`"^T-\\d{3,}$"` is the five characters `^T-\\d{3,}$` and so on); a trailing `# comment` after
  a value is part of the value;
- `[a, "b"]` is a list of values (split on commas outside quotes, each item read the same way,
  so `[a, [b]]` nests); an empty value is an empty mapping, which the indented lines below it
  fill as a nested mapping, or as a list when the first of them is a `- item`;
- `|` and `>` (with `+` or `-`) start a block scalar: every following line indented deeper;
- a value that opens a quote or `[` without closing it at the end is an invalid value
  (`invalid_yaml_value:N`) in the strict reader.

The delimiters are the strict reader's (`parseFrontmatterStrict`): one BOM is ignored, the file
starts with a `---` line, and the header ends at the next line that is `---` (spaces or tabs may
follow either). `project.md` is read by agenticloop with the lenient reader (`parseFrontmatter`,
no BOM allowed, invalid lines skipped): `read_lenient` gives exactly that.

Whitespace, trimming and `.` are JavaScript's: `\\s` is its set (with U+FEFF, without the C0
separators), `.` stops at CR, LF, U+2028 and U+2029, and lines split at LF or CRLF only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: JavaScript's \s (WhiteSpace and LineTerminator): what trim() removes and \s matches.
JS_SPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_S = "[" + re.escape(JS_SPACE) + "]"
#: JavaScript's `.` without the s flag.
_DOT = "[^\n\r\u2028\u2029]"

_KEY_VALUE = re.compile(
    rf"({_S}*)(?:\"([^\"]+)\"|'([^']+)'|([^:#][^:]*?)):{_S}*({_DOT}*)\Z", re.DOTALL
)
_ITEM = re.compile(rf"{_S}*-{_S}+({_DOT}+?){_S}*\Z", re.DOTALL)
_DASH_ITEM = re.compile(rf"{_S}*-{_S}+")
_INDENT = re.compile(rf"{_S}*")
_BLOCK_STYLE = re.compile(r"[>|][+-]?\Z")
_LINES = re.compile(r"\r?\n")
_FOLD = re.compile(r"([^\n])\n(?=[^\n])")
_OPENING = re.compile(r"---[ \t]*\r?\n")
_IMMEDIATE_CLOSING = re.compile(r"---[ \t]*(?=\r?\n|\Z)")
_CLOSING = re.compile(r"\r?\n---[ \t]*(?=\r?\n|\Z)")
_LENIENT = re.compile(r"---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n([\s\S]*))?\Z")

#: Deepest `[` nesting read; agenticloop has no limit, but a few KiB of `[[[[` cost seconds.
MAX_DEPTH = 32


class TooDeep(Exception):
    """A value nests `[` lists more than MAX_DEPTH levels deep."""


def trim(text: str) -> str:
    """JavaScript's String.prototype.trim."""
    return text.strip(JS_SPACE)


def indentation(raw: str) -> int:
    m = _INDENT.match(raw)
    return m.end() if m else 0


def parse_key_value_line(raw: str) -> tuple[int, str, str] | None:
    """(indent, key, raw value) of a `key: value` line, or None (`parseKeyValueLine`)."""
    m = _KEY_VALUE.match(raw)
    if m is None:
        return None
    key = m.group(2)
    if key is None:
        key = m.group(3)
    if key is None:
        key = m.group(4) or ""
    return len(m.group(1)), trim(key), m.group(5) or ""


def parse_scalar(raw_value: str, depth: int = 0) -> tuple[object, bool]:
    """(value, is it an empty mapping) of a raw value (`parseScalar`)."""
    value = trim(raw_value)
    if value == "":
        return {}, True
    if (value.startswith('"') and value.endswith('"')) or (
        value.startswith("'") and value.endswith("'")
    ):
        return value[1:-1], False
    if value.startswith("[") and value.endswith("]"):
        if depth >= MAX_DEPTH:
            raise TooDeep
        inner = trim(value[1:-1])
        if not inner:
            return [], False
        values: list[Any] = []
        current: list[str] = []
        quote = ""
        for char in inner:
            if char in "\"'" and (not quote or quote == char):
                quote = "" if quote else char
                current.append(char)
            elif char == "," and not quote:
                values.append(parse_scalar("".join(current), depth + 1)[0])
                current = []
            else:
                current.append(char)
        rest = "".join(current)
        if trim(rest):
            values.append(parse_scalar(rest, depth + 1)[0])
        return values, False
    return value, False


def _nested_container(
    lines: list[str], index: int, parent_indent: int
) -> dict[str, Any] | list[Any]:
    for cursor in range(index + 1, len(lines)):
        raw = lines[cursor]
        if not trim(raw) or trim(raw).startswith("#"):
            continue
        if indentation(raw) <= parent_indent:
            return {}
        return [] if _DASH_ITEM.match(raw) else {}
    return {}


def _block_scalar(lines: list[str], index: int, parent_indent: int, style: str) -> tuple[str, int]:
    collected: list[str] = []
    cursor = index + 1
    while cursor < len(lines):
        raw = lines[cursor]
        if trim(raw) and indentation(raw) <= parent_indent:
            break
        collected.append(raw)
        cursor += 1
    indents = [indentation(line) for line in collected if trim(line)]
    content_indent = min(indents) if indents else parent_indent + 1
    values = [line[content_indent:] if trim(line) else "" for line in collected]
    value = "\n".join(values)
    if style.startswith(">"):
        value = _FOLD.sub(r"\1 ", value)
        value = re.sub(r"\n{3,}", "\n\n", value)
    if style.endswith("-"):
        value = value.rstrip("\n")
    elif not style.endswith("+") and value:
        value = value.rstrip("\n") + "\n"
    return value, cursor - 1


def parse_data(text: str, strict: bool = True) -> tuple[dict[str, Any] | None, str | None]:
    """(mapping, None), or (None, reason) when `strict` and a line is invalid
    (`parseFrontmatterData`; with strict=False, the loop of `parseFrontmatter`)."""
    data: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any] | list[Any]]] = [(-1, data)]
    lines = _LINES.split(text)
    index = 0
    while index < len(lines):
        raw = lines[index]
        number = index + 1
        index += 1
        trimmed = trim(raw)
        if not trimmed or trimmed.startswith("#"):
            continue
        indent = indentation(raw)
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        if isinstance(parent, list):
            item = _ITEM.match(raw)
            if item is None:
                if strict:
                    return None, f"invalid_yaml_line:{number}"
                continue
            parent.append(parse_scalar(item.group(1))[0])
            continue
        parsed = parse_key_value_line(raw)
        if parsed is None:
            if strict:
                return None, f"invalid_yaml_line:{number}"
            continue
        _, key, raw_value = parsed
        style = trim(raw_value)
        if _BLOCK_STYLE.match(style):
            value, last = _block_scalar(lines, number - 1, indent, style)
            _assign(parent, key, value)
            index = last + 1
            continue
        if style == "":
            container = _nested_container(lines, number - 1, indent)
            _assign(parent, key, container)
            stack.append((indent, container))
            continue
        if strict and (
            (style.startswith('"') and not style.endswith('"'))
            or (style.startswith("'") and not style.endswith("'"))
            or (style.startswith("[") and not style.endswith("]"))
        ):
            return None, f"invalid_yaml_value:{number}"
        _assign(parent, key, parse_scalar(raw_value)[0])
    return data, None


def _assign(parent: dict[str, Any], key: str, value: object) -> None:
    # In JavaScript `obj["__proto__"] = x` sets no key at all: keep it out too.
    if key != "__proto__":
        parent[key] = value


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """What the strict reader made of a file: state `absent`, `valid` or `malformed`."""

    state: str
    data: dict[str, Any] | None
    #: agenticloop's reason code when malformed (`invalid_yaml_line:7`, ...).
    reason: str | None = None
    #: The header's own text (between the delimiter lines), when both were found.
    text: str | None = None


def read_frontmatter(content: str) -> Frontmatter:
    """The header of a file's text, as `parseFrontmatterStrict` reads it. Raises TooDeep."""
    normalized = content[1:] if content.startswith("\ufeff") else content
    if not normalized.startswith("---"):
        return Frontmatter("absent", None)
    opening = _OPENING.match(normalized)
    if opening is None:
        return Frontmatter("malformed", None, "invalid_opening_delimiter")
    start = opening.end()
    if _IMMEDIATE_CLOSING.match(normalized, start):
        fm_text = ""
    else:
        closing = _CLOSING.search(normalized, start)
        if closing is None:
            return Frontmatter("malformed", None, "missing_closing_delimiter")
        fm_text = normalized[start : closing.start()]
    data, reason = parse_data(fm_text)
    if data is None:
        return Frontmatter("malformed", None, reason or "invalid_frontmatter_shape", fm_text)
    return Frontmatter("valid", data, None, fm_text)


def read_lenient(content: str) -> dict[str, Any] | None:
    """The header as `parseFrontmatter` reads it (how agenticloop loads project.md): None
    when there is none (no BOM allowed), and invalid lines skipped."""
    if not content.startswith("---"):
        return None
    m = _LENIENT.match(content)
    if m is None:
        return None
    return parse_data(m.group(1), strict=False)[0]


def string(value: object) -> str:
    """agenticloop's `frontmatterString`: a text value trimmed, anything else empty."""
    return trim(value) if isinstance(value, str) else ""


def describe(reason: str, fm_text: str | None, first_line: int = 2) -> str:
    """A reason code in words, naming the line as the file numbers it (the header's first
    line is the file's line `first_line`)."""
    kind, _, number = reason.partition(":")
    if kind in ("invalid_yaml_line", "invalid_yaml_value") and number.isdigit():
        n = int(number)
        lines = _LINES.split(fm_text or "")
        shown = lines[n - 1] if 0 < n <= len(lines) else ""
        if len(shown) > 60:
            shown = shown[:59] + "…"
        where = f"line {n + first_line - 1}"
        if kind == "invalid_yaml_value":
            return f"{where}: the value in {shown!r} opens a quote or [ that it does not close"
        return f"{where}: {shown!r} is neither `key: value`, a `- item` nor a # comment"
    return {
        "invalid_opening_delimiter": "the first line is not exactly ---",
        "missing_closing_delimiter": "the header opened with --- is never closed",
    }.get(reason, reason)
