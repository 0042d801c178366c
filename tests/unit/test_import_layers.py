"""Arrows point down (issue 34 part 3): a module imports its own stage, the stages to its left
and the leaves, and nothing above it but the upward imports docs/architecture.md lists.

The layers and the listed exceptions are written here and in docs/architecture.md "Arrows";
the test reads the package's relative imports (lazy ones inside functions included, type-only
ones under `if TYPE_CHECKING:` left out)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import cannbot_prefetch as cp

SRC = Path(cp.__file__).resolve().parent
DOC = SRC.parent.parent / "docs" / "architecture.md"

LEAVES = {"errors", "reasons", "status", "settings", "policy", "yaml_safe", "inputfile", "i18n",
          "gc_pause", "atomic", "contract", "fmt", "pysource", "legality"}
# left to right, as the pipeline runs; one rank per step (same rank: may import each other)
STAGES = [["hardware"], ["profiling"], ["roofline"], ["windows"], ["ranks"], ["mapping"],
          ["moe", "gain", "sizing"], ["plan"], ["rewrite"], ["verify", "report"], ["pipeline"],
          ["api"], ["cli"]]
RANK = {name: i + 1 for i, names in enumerate(STAGES) for name in names}
RANK.update({name: 0 for name in LEAVES})

# (importing unit, imported unit, the module that imports): the documented upward imports
UPWARD = {
    ("mapping", "rewrite", "mapping/mapper.py"),   # apply's own per-site check before planning
    ("plan", "rewrite", "plan/design.py"),           # is a target in an installed package
}


def _type_only(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def imports():
    """(importing unit, imported unit, module path) for every relative import in the package."""
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        parts = list(rel.with_suffix("").parts)
        if parts == ["__init__"]:
            continue                       # the package root: lazily exposes api/, on purpose
        unit = parts[0]
        package = parts[:-1]               # the folder the module is in
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_only(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.level or node.lineno in skip:
                continue
            base = package[:len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            names = [target[0]] if target else [a.name for a in node.names]
            for name in names:
                if name != "__version__":
                    yield unit, name, rel.as_posix()


def test_every_unit_has_a_layer():
    units = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")}
    assert units - {"__init__"} <= set(RANK), sorted(units - set(RANK) - {"__init__"})


def test_imports_point_down_except_the_documented_ones():
    found = set()
    for unit, name, where in imports():
        if unit == name or RANK[name] == 0 and RANK[unit] == 0 or RANK[name] < RANK[unit] \
                or RANK[name] == RANK[unit]:
            continue
        assert (unit, name, where) in UPWARD, f"{where} imports {name}/ (above {unit})"
        found.add((unit, name, where))
    assert found == UPWARD     # an exception that is gone leaves the list


def test_leaves_import_only_leaves():
    for unit, name, where in imports():
        if RANK.get(unit) == 0 and unit != name:
            assert RANK[name] == 0, f"{where} (a leaf) imports {name}/"


def test_the_documented_list_is_this_list():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Arrows", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)/?` → `([a-z_]+)/?` \(`([a-z_/]+\.py)`", section))
    assert listed == UPWARD
