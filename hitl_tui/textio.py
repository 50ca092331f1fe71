"""Byte-faithful text editing: decode any bytes, edit lines, encode back to the same bytes.

Agent files may carry a BOM, CRLF, mixed endings or invalid UTF-8. We decode with
`surrogateescape` so that undecodable bytes survive a round trip, keep the BOM aside, and insert
new lines with the file's own line ending, so an edit changes only the lines it means to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

BOM = "\ufeff"

#: Words that leave an answer open, refused in the operator's own words for every format (the
#: loop would act on a placeholder). They are agenticloop's task linter's
#: (`src/validate-config.js` PLACEHOLDER_PATTERNS), where a task file matching one fails
#: validation, which blocks every later transition. JavaScript's `\b` and
#: `/i` are ASCII-only: so are these. Each with the word the refusal names and why it is one.
PLACEHOLDERS = (
    ("TBD", re.compile(r"\bTBD\b", re.I | re.A), "it leaves the decision open"),
    ("as needed", re.compile(r"\bas needed\b", re.I | re.A), "it does not say how much"),
    ("etc.", re.compile(r"\betc\.", re.I | re.A), "it does not say what else"),
    (
        "similar to previous task",
        re.compile(r"\bsimilar to previous task\b", re.I | re.A),
        "it points elsewhere instead of saying it",
    ),
    ("to be filled", re.compile(r"\bto be filled\b", re.I | re.A), "it leaves the text to later"),
    (
        "to be filled during review",
        re.compile(r"\bto be filled during review\b", re.I | re.A),
        "it leaves the text to later",
    ),
)


def placeholder_in(text: str, quoted: str = "") -> str | None:
    """`the placeholder 'TBD' ('tbd': it leaves the decision open)` for the first placeholder
    word in `text` (one `quoted` holds as often is not counted: the agent's own), or None."""
    for word, pattern, why in PLACEHOLDERS:
        found = pattern.search(text)
        if found and len(pattern.findall(text)) > len(pattern.findall(quoted)):
            return f"the placeholder {word!r} ({found.group(0)!r}: {why})"
    return None


_HEADING_START = re.compile(r"^[ \t]{0,3}(#{1,6})")


def heading_of(line: str, require_space: bool = False) -> tuple[int, str] | None:
    r"""(level, text) of an ATX heading line (`## Question:`), else None.

    Plain string work after a bounded prefix match: a single regex such as
    `^#+\s*(.*?)\s*#*\s*$` backtracks for minutes on a heading padded with thousands of spaces,
    and agents write such lines. `require_space` asks for CommonMark's space after the hashes;
    without it `##Question` counts too, as a lenient reader of model-written files wants.
    """
    m = _HEADING_START.match(line)
    if m is None:
        return None
    rest = line[m.end() :]
    if rest.startswith("#"):
        return None
    if require_space and rest and rest[0] not in " \t":
        return None
    text = rest.strip()
    closed = text.rstrip("#")
    if closed != text and (not closed or closed[-1] in " \t"):
        text = closed.strip()
    return len(m.group(1)), text


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class TextDoc:
    """A file's text split into lines that keep their own endings."""

    lines: list[str]
    bom: bool
    newline: str

    @classmethod
    def from_bytes(cls, data: bytes | None) -> TextDoc:
        text = (data or b"").decode("utf-8", "surrogateescape")
        bom = text.startswith(BOM)
        if bom:
            text = text[1:]
        # Markdown lines end only in \n, \r\n or \r (str.splitlines would also cut at U+2028,
        # form feeds and NEL, and an insertion there would split a line of the file in two).
        lines = _LINE.findall(text)
        # New lines take the file's most common ending, so a stray CRLF does not spread.
        crlf = text.count("\r\n")
        counts = {"\n": text.count("\n") - crlf, "\r\n": crlf, "\r": text.count("\r") - crlf}
        newline = max(counts, key=lambda ending: counts[ending])  # ties: the first, \n
        return cls(lines, bom, newline)

    def to_bytes(self) -> bytes:
        text = (BOM if self.bom else "") + "".join(self.lines)
        return text.encode("utf-8", "surrogateescape")

    def ensure_final_newline(self) -> None:
        """Terminate the last line before appending below it (its content is unchanged)."""
        if self.lines and not self.lines[-1].endswith(("\n", "\r")):
            self.lines[-1] += self.newline

    def insert(self, index: int, texts: list[str]) -> None:
        """Insert new lines (given without endings) before line `index`."""
        if index >= len(self.lines):
            self.ensure_final_newline()
        self.lines[index:index] = [t + self.newline for t in texts]

    def find_heading(self, name: str, levels: range = range(1, 7)) -> tuple[int, int] | None:
        """(line index, level) of the first heading called `name` (any case, optional colon)."""
        want = normalise_heading(name)
        fence = False
        for i, line in enumerate(self.lines):
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                fence = not fence
                continue
            if fence:
                continue
            h = heading_of(line.rstrip("\r\n"))
            if h and h[0] in levels and normalise_heading(h[1]) == want:
                return i, h[0]
        return None

    def section_end(self, start: int, level: int) -> int:
        """Index just after the last non-blank line of the section whose heading is at `start`."""
        end = len(self.lines)
        fence = False
        for i in range(start + 1, len(self.lines)):
            stripped = self.lines[i].strip()
            if stripped.startswith(("```", "~~~")):
                fence = not fence
            if fence:
                continue
            h = heading_of(self.lines[i].rstrip("\r\n"))
            if h and h[0] <= level:
                end = i
                break
        last = start
        for i in range(start + 1, end):
            if self.lines[i].strip():
                last = i
        return last + 1


def normalise_heading(text: str) -> str:
    text = text.strip().strip("*_").strip()
    text = text.rstrip(":").strip()
    return " ".join(text.casefold().split())


def one_line(text: str) -> str:
    """Collapse whitespace so that a value fits on one bullet line."""
    return " ".join(text.split())


def _printable_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        table[code] = chr(0x2400 + code)  # control pictures: ␛ for ESC, ␀ for NUL
    table[0x7F] = "␡"
    for code in range(0x80, 0xA0):
        table[code] = "�"
    # Invisible direction overrides and zero-width marks can disguise what a line says.
    for code in [*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]:
        table[code] = "�"
    table[0xFEFF] = ""
    # Lone surrogates: a file name's undecodable bytes (`os.fsdecode` turns byte 0xE9 into
    # U+DCE9). Shown as the byte they stand for, `\xe9`; no strict UTF-8 output accepts them.
    for code in range(0xD800, 0xE000):
        table[code] = f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
    return table


_PRINTABLE = _printable_table()
_PRINTABLE_LINES = {**_PRINTABLE, ord("\n"): "\n", ord("\t"): "    "}


def printable(text: str, keep_newlines: bool = False) -> str:
    """Agent text made safe for a terminal: no escape sequence or control byte survives.

    Control characters become visible symbols (ESC shows as ␛), so a hostile file can neither
    restyle the terminal nor hide what it says; a path's undecodable byte shows as `\\xe9`.
    Markup is a separate matter: the UI never renders this text as markup at all.
    """
    if keep_newlines:
        text = text.replace("\r\n", "\n")
        return text.translate(_PRINTABLE_LINES)
    return text.translate(_PRINTABLE)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(encoded: str) -> str:
    r"""JSON from `json.dumps(..., ensure_ascii=False)` with lone surrogates as `\udce9` escapes.

    A path with undecodable bytes holds lone surrogates; written raw they are not UTF-8 at all.
    As escapes they are valid JSON and UTF-8, and lossless: `os.fsencode(json.loads(...))` gives
    the original bytes back. (Surrogates only ever occur inside JSON strings.)
    """
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def json_encoder() -> Callable[[object], str]:
    """A function from a plain JSON value (str, int, bool, None, lists, str-keyed dicts) to
    its JSON text, non-ASCII as it is and valid UTF-8: orjson, else json (what orjson refuses,
    or without it), its lone surrogates as `\udce9` escapes (see `textio.json_text`)."""
    plain = json.JSONEncoder(ensure_ascii=False).encode

    def stdlib(data: object) -> str:
        return json_text(plain(data))

    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency
        return stdlib
    dumps = orjson.dumps

    def encode(data: object) -> str:
        try:
            return dumps(data).decode()  # never a surrogate: orjson refuses them
        except TypeError:  # a lone surrogate (an undecodable path), an int beyond 64 bits
            return stdlib(data)

    return encode
