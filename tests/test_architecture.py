"""The structure that keeps the domain honest, checked on the source itself.

- The domain (everything that finds, parses, plans, writes, journals and watches blocks) never
  imports the terminal UI, the command line, or Textual: the CLI and the app are its clients.
- A source module never imports another source: each format stands alone.
- No import cycles between hitl's modules, lazy imports inside functions included.

The import graph is read from the code with `ast`, so a lazy `from hitl_tui.cli import ...`
inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hitl_tui"

#: The clients of the domain: they may import anything.
CLIENTS = ("hitl_tui.cli", "hitl_tui.agent_cli", "hitl_tui.journal_cli", "hitl_tui.__main__")
CLIENTS += ("hitl_tui.demo", "hitl_tui.cli_base", "hitl_tui.triage_cli", "hitl_tui.loop_cli")
CLIENTS += ("hitl_tui.status_cli", "hitl_tui.watch_cli", "hitl_tui.serve_cli")
#: The modules that each implement a block source.
SOURCES = (
    "hitl_tui.sources.loopkit",
    "hitl_tui.sources.agenticloop",
    "hitl_tui.sources.github",
    "hitl_tui.sources.ssh",
)


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


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def is_client(name: str) -> bool:
    return name in CLIENTS or name == "hitl_tui.tui" or name.startswith("hitl_tui.tui.")


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


def test_sources_never_import_each_other() -> None:
    g = graph()
    assert {s: sorted(g[s] & set(SOURCES)) for s in SOURCES if g[s] & set(SOURCES)} == {}


def test_no_import_cycles() -> None:
    g = graph()
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
