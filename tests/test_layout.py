"""The layout check: no circle between bench's modules or between its packages.

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a circle hidden
in a function is still a circle. A package is ``bench.X`` (a folder) or a root module.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _name(path: Path) -> str:
    parts = path.relative_to(BENCH.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each bench module and the bench modules it imports (engine-side scripts aside: they
    run in the engine's environment and import nothing of bench)."""
    files = {_name(p): p for p in BENCH.rglob("*.py") if "scripts" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # ``from pkg import submodule`` depends on the submodule, not on the
                # package's ``__init__`` (Python imports a parent package first anyway).
                subs = {f"{base}.{a.name}" for a in node.names} & files.keys()
                found |= subs if len(subs) == len(node.names) else subs | {base}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def package_of(module: str) -> str:
    """``bench.run.passes`` -> ``bench.run``; a root module is its own package."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(package_of(module), set()).update(
            package_of(d) for d in deps if package_of(d) != package_of(module))
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        return exc.args[1]
    return None


@pytest.mark.parametrize("level", ["module", "package"])
def test_no_circles(level: str):
    graph = import_graph()
    cycle = _cycle(graph if level == "module" else package_graph(graph))
    assert cycle is None, f"{level}s in a circle: {' -> '.join(cycle or [])}"


def test_the_check_sees_a_circle():
    assert _cycle({"a": {"b"}, "b": {"a"}}) is not None
    assert _cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert "bench.vocab" in graph["bench.run.passes"] | graph["bench.verdicts.requests"]
