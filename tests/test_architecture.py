"""The structure that keeps the domain honest, checked on the source itself.

- The domain (everything that finds, parses, plans, writes, journals and watches blocks) never
  imports the terminal UI, the command line, or Textual: the CLI and the app are its clients.
- A backend package never imports another backend's: each format stands alone.
- No import cycles between hitl's modules, lazy imports inside functions and the package
  faces (`__init__`) an import runs included.
- No module over 800 lines (those still over it are listed, and the list only shrinks).
- No backend named outside its package: the rest asks `Source` what it can do.

The layers themselves are import-linter contracts (pyproject.toml, run by scripts/test);
import-linter sees imports inside functions too; it does not see the package faces an import
runs, nor sizes and names.

The import graph is read from the code with `ast`, so a lazy `from hitl_tui.cli import ...`
inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hitl_tui"

# rewrite_imports: skip-file (this file names the new packages; see notes/rewrite_imports.py)

#: The clients of the domain: they may import anything.
CLIENTS = ("hitl_tui.cli", "hitl_tui.tui", "hitl_tui.__main__")
#: The backend packages, each a block source of its own.
SOURCES = (
    "hitl_tui.sources.loopkit",
    "hitl_tui.sources.agenticloop",
    "hitl_tui.sources.github",
    "hitl_tui.sources.ssh",
)
#: The names blocks carry for each backend (`Block.source`).
SOURCE_NAMES = {"loopkit", "agenticloop", "github", "remote"}
#: Modules over MAX_LINES today; each is split next (issue 24). The list only shrinks: the
#: test fails if another module passes MAX_LINES, or if one of these is no longer over it.
MAX_LINES = 800
TOO_BIG_FOR_NOW: set[str] = set()
#: Backend names compared outside their package, allowed for now: (module, name).
BACKEND_NAMED_FOR_NOW: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The hitl modules `name` imports anywhere in its code (its own parent packages aside:
    importing `a.b.c` runs `a/b/__init__.py`, which is not a dependency of the importer)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            submodules = {f"{module}.{alias.name}" for alias in node.names} & known
            found.update(submodules or {module})
    parents = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in parents}


def faces(name: str, imported: str) -> set[str]:
    """The package faces (`__init__`) that importing `imported` from `name` runs: every
    package above it, but those above `name` too (they ran before `name` did)."""
    above = {imported.rsplit(".", n)[0] for n in range(1, imported.count(".") + 1)}
    own = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)} | {name}
    return above - own


def graph(with_faces: bool = False) -> dict[str, set[str]]:
    """Who imports whom. `with_faces`: an import also runs the package faces above the
    imported module, so an `__init__` that imports back up closes a cycle."""
    mods = modules()
    g = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    if with_faces:
        g = {name: deps | {f for d in deps for f in faces(name, d)} for name, deps in g.items()}
    return g


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def is_client(name: str) -> bool:
    return any(within(name, client) for client in CLIENTS)


def test_the_domain_never_imports_the_ui_or_the_cli() -> None:
    wrong = {
        name: sorted(d for d in deps if is_client(d))
        for name, deps in graph().items()
        if not is_client(name)
    }
    assert {name: deps for name, deps in wrong.items() if deps} == {}


def test_the_domain_never_imports_textual() -> None:
    domain = [name for name in modules() if not is_client(name)]
    code = (
        "import importlib, sys\n"
        f"for name in {domain!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_backends_never_import_each_other() -> None:
    g = graph(with_faces=True)
    wrong = {
        name: sorted(d for d in deps if any(within(d, o) for o in SOURCES if o != own))
        for own in SOURCES
        for name, deps in g.items()
        if within(name, own)
    }
    assert {name: deps for name, deps in wrong.items() if deps} == {}


def test_no_import_cycles() -> None:
    """Package faces counted: importing `a.b.c` runs `a/__init__` and `a/b/__init__`."""
    g = graph(with_faces=True)
    cycles = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_module_is_over_800_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text().splitlines())
        for path in modules().values()
    }
    over = {path for path, lines in sizes.items() if lines > MAX_LINES}
    assert sorted(over - TOO_BIG_FOR_NOW) == [], "split these: no module over 800 lines"
    assert sorted(TOO_BIG_FOR_NOW - over) == [], "no longer too big: drop from TOO_BIG_FOR_NOW"


def backend_names(path: Path) -> set[str]:
    """The backend names a module compares a block's or record's `source` with, or asks the
    inbox for by name (`source_named("github")`)."""
    found: set[str] = set()

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and node.value in SOURCE_NAMES:
            return {node.value}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return {n for elt in node.elts for n in names(elt)}
        return set()

    def is_source(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "source") or (
            isinstance(node, ast.Name) and node.id == "source"
        )

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_source(side) for side in sides):
                found.update(n for side in sides for n in names(side))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "source_named":
            found.update(n for arg in node.args for n in names(arg))
    return found


def test_no_backend_is_named_outside_its_package() -> None:
    """Only a backend's own package (and the registry, the one table of them) tells blocks of
    one backend from another's by name: the rest asks `Source` what it can do."""
    named = {
        (name, backend)
        for name, path in modules().items()
        if not within(name, "hitl_tui.sources")
        for backend in backend_names(path)
    }
    assert sorted(named - BACKEND_NAMED_FOR_NOW) == []
    assert sorted(BACKEND_NAMED_FOR_NOW - named) == [], "gone: drop it from the allowance"


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The graph reader finds lazy imports, relative imports and `from package import module`."""
    mods = {"hitl_tui.a", "hitl_tui.b", "hitl_tui.sources", "hitl_tui.sources.c"}
    code = tmp_path / "a.py"
    code.write_text(
        "def f():\n    from hitl_tui.b import x\nfrom .sources import c\nimport hitl_tui.sources\n"
    )
    assert imports("hitl_tui.a", code, mods) == {
        "hitl_tui.b",
        "hitl_tui.sources.c",
        "hitl_tui.sources",
    }
    # a face is counted: importing hitl_tui.sources.c runs hitl_tui/sources/__init__.py
    assert faces("hitl_tui.a", "hitl_tui.sources.c") == {"hitl_tui.sources"}
    assert faces("hitl_tui.sources.d", "hitl_tui.sources.c") == set()
    code.write_text('if block.source == "github" or b.source in ("loopkit", "x"):\n    pass\n')
    assert backend_names(code) == {"github", "loopkit"}


def test_the_readme_module_map_names_every_module() -> None:
    """The README's map of `hitl_tui/` matches the tree: every module is named in it, and
    every `name.py` it names exists."""
    import re

    readme = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    start = readme.index("```\nhitl_tui/\n")
    block = readme[start : readme.index("```", start + 4)]
    named = set(re.findall(r"\b([a-z_]+\.py)\b", block))
    modules = {p.name for p in PACKAGE.rglob("*.py")} - {"__init__.py", "__main__.py"}
    assert modules - named == set(), "modules missing from the README's map"
    assert named - modules == set(), "the README names modules that are gone"


def test_every_worker_names_itself() -> None:
    """Textual describes a worker started without `description=` by the repr of its arguments:
    for a list of 5,000 blocks, or a Plan with whole files in it, that cost the UI 100 ms at
    every call (the seen marks' save, every 5 s)."""
    missing = []
    for path in (PACKAGE / "tui").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    work = isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "work"
                    if work and not any(k.arg == "description" for k in deco.keywords):
                        missing.append(f"{path.name}:{node.name}")
    assert missing == []


def test_hitl_list_starts_without_asyncio_textual_or_a_child_process(tmp_path: Path) -> None:
    """`hitl list --json` on a repository, in a fresh interpreter: it lists the block, and
    imports neither Textual nor asyncio (a quarter of its start, once) and starts no process
    (finding the C library by name ran `ldconfig -p` twice at every start)."""
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text("# Blocked\n\n## Question:\nShip it?\n")
    code = (
        "import json, sys\n"
        "events = []\n"
        "sys.addaudithook(lambda event, args: event in ('subprocess.Popen', 'os.posix_spawn',"
        " 'os.fork', 'os.exec') and events.append(event))\n"
        "from hitl_tui.cli.commands import main\n"
        f"code = main(['list', '--json', {str(repo)!r}])\n"
        "loaded = [m for m in ('asyncio', 'textual') if m in sys.modules]\n"
        "print(json.dumps([code, loaded, events]), file=sys.stderr)\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HITL_STATE_DIR": str(tmp_path / "state"),
        "HITL_CONFIG": str(tmp_path / "no-config.toml"),
    }
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    import json

    listed = json.loads(run.stdout)
    assert [b["question"] for b in listed] == ["Ship it?"], run.stdout
    code, loaded, events = json.loads(run.stderr.strip().splitlines()[-1])
    assert (code, loaded, events) == (0, [], []), run.stderr
