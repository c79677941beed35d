"""No import cycle between the modules of ``src/adlnmt``: every import statement counts, also inside functions
and ``TYPE_CHECKING`` blocks, so a lower layer of the architecture never reaches up to a higher one."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"


def module_files(root: Path, package: str) -> dict[str, Path]:
    files = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module → the package's modules it imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    files = module_files(root, package)

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join([*anchor[: len(anchor) - node.level + 1], node.module or ""]).strip(".") \
                    if node.level else node.module or ""  # fmt: skip
                targets += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
        graph[module] = {found for t in targets if (found := owner(t)) and found != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[module] = 2
        path.pop()
        return None

    return next((cycle for module in sorted(graph) if module not in state and (cycle := visit(module))), None)


def test_no_import_cycle_in_the_package() -> None:
    cycle = find_cycle(import_graph(SOURCE, "adlnmt"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_check_finds_an_injected_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (package / "c.py").write_text("import pkg.sub\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None


# The architecture from the bottom up (docs/api.md draws it): a unit — a subpackage or a top-level module of adlnmt —
# imports only units of lower levels. A new unit gets a level here.
LEVELS: tuple[set[str], ...] = (
    {"errors", "version", "jsontext"},
    {"bounds", "atomic", "yamltext", "devices", "memory"},
    {"flags"},
    {"adl", "data", "speedups"},
    {"exits", "layers", "published", "metrics"},
    {"model_config", "presets"},
    {"model"},
    {"store"},
    {"diagram", "plotting"},
    {"inference"},
    {"interop"},
    {"export"},
    {"train"},
    {"average", "analysis", "distill", "publish", "verdicts"},
    {"bench"},
    {"experiment"},
    {"serve"},
    {"describe"},
    {"cli"},
    {"__main__", ""},  # "": the package's own __init__ (the lazy public API)
)


def unit_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def upward_imports(graph: dict[str, set[str]], levels: tuple[set[str], ...]) -> list[str]:
    """Every import of a unit by a unit of the same or a lower level, as "module -> imported (level i -> j)"; a unit
    that has no level is reported too."""
    level = {unit: index for index, units in enumerate(levels) for unit in units}
    found = [f"{module}: unit '{unit_of(module)}' has no level" for module in graph if unit_of(module) not in level]
    for module, imported in sorted(graph.items()):
        source = unit_of(module)
        for target in sorted(imported):
            if unit_of(target) != source and level.get(unit_of(target), -1) >= level.get(source, len(levels)):
                found.append(f"{module} -> {target} (level {level.get(source)} -> {level.get(unit_of(target))})")
    return found


def test_no_import_runs_back_up_between_packages() -> None:
    upward = upward_imports(import_graph(SOURCE, "adlnmt"), LEVELS)
    assert not upward, "imports that run back up:\n" + "\n".join(upward)


def test_the_layer_check_finds_an_injected_upward_import(tmp_path: Path) -> None:
    package = tmp_path / "adlnmt"
    for unit in ("model", "serve"):
        (package / unit).mkdir(parents=True)
        (package / unit / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "serve" / "app.py").write_text("from adlnmt.model import core\n")
    (package / "model" / "core.py").write_text("X = 1\n")
    levels = ({"model"}, {"serve"}, {""})
    assert upward_imports(import_graph(tmp_path, "adlnmt"), levels) == []
    (package / "model" / "core.py").write_text("def f():\n    from ..serve import app\n")  # lazy, relative
    assert upward_imports(import_graph(tmp_path, "adlnmt"), levels) == [
        "adlnmt.model.core -> adlnmt.serve.app (level 0 -> 1)"
    ]
    (package / "extra.py").write_text("")
    assert "adlnmt.extra: unit 'extra' has no level" in upward_imports(import_graph(tmp_path, "adlnmt"), levels)
