"""The package's floors (issue 34), read from every module's imports (function-level ones too): the library (the
package's top-level modules and subpackages) never imports the application (``bnnpred.app``), the studies
(``bnnpred.reproduce``) or the command line (``bnnpred.cli``); the application imports neither the studies nor the
command line; the studies never import the command line; and no two rooms (top-level modules and subpackages)
import each other, however indirectly."""

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bnnpred"
FLOORS = {"library": 0, "app": 1, "reproduce": 2, "cli": 3}


def room(module: str) -> str:
    """``bnnpred.app.runner`` -> ``app``; ``bnnpred`` (the package root) -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor(room_name: str) -> str:
    return {"app": "app", "reproduce": "reproduce", "cli": "cli", "__main__": "cli"}.get(room_name, "library")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imports() -> list[tuple[str, str]]:
    """``(importing module, imported bnnpred module)`` for every import statement in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                targets = ["relative"]  # refused by the test below
            elif isinstance(node, ast.ImportFrom) and node.module == "bnnpred":  # a module, or a name of the root
                targets = [f"bnnpred.{alias.name}" if (PACKAGE / alias.name).is_dir()
                           or (PACKAGE / f"{alias.name}.py").is_file() else "bnnpred" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bnnpred."):
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith("bnnpred")]
            else:
                continue
            found += [(module_name(path), target) for target in targets]
    return found


def test_the_import_walk_sees_the_package():
    """The rule tests below read what this walk finds: it must find the known doors."""
    found = set(imports())
    assert ("bnnpred.cli", "bnnpred.reproduce") in found
    assert ("bnnpred.app.runner", "bnnpred.inference") in found
    assert len(found) > 200


def test_every_import_names_its_module_in_full():
    """Relative imports would escape the rules above (the walk reads absolute names)."""
    assert sorted(a for a, b in imports() if b == "relative") == []


@pytest.mark.parametrize("lower,upper", [(lo, up) for lo in FLOORS for up in FLOORS if FLOORS[up] > FLOORS[lo]])
def test_no_floor_imports_one_above_it(lower, upper):
    wrong = sorted(f"{a} imports {b}" for a, b in imports()
                   if floor(room(a)) == lower and floor(room(b)) == upper)
    assert wrong == []


def test_no_two_rooms_import_each_other_however_indirectly():
    edges: dict[str, set[str]] = {}
    for a, b in imports():
        if room(a) != room(b):
            edges.setdefault(room(a), set()).add(room(b))

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    circles = sorted(r for r in edges if r in reachable(r))
    assert circles == []
