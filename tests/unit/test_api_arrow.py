"""One arrow from api/ to the stages (issue 34 part 3): api/ runs every stage through
`pipeline`, and reaches a stage package itself only to render, serialise or write a result it
already holds — the modules listed here and in docs/architecture.md "Arrows". A stage entry
called from api/ directly (orchestration written twice) fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

import cannbot_prefetch as cp

API = Path(cp.__file__).resolve().parent / "api"
LEAVES = {"errors", "status", "policy", "i18n", "atomic", "fmt", "contract", "reasons",
          "settings"}
# (api module, stage module it imports): rendering, serialising or writing a held result
RENDER_WRITE = {
    ("analysis.py", "plan"),              # dump_plan: the Plan as prefetch_plan.yaml text
    ("analysis.py", "plan.design"),       # render_design: prefetch_design.md
    ("analysis.py", "plan.picture"),      # the per-layer SVG pictures
    ("analysis_json.py", "gain"),         # the JSON's gain bounds, from the one gain function
    ("reporting.py", "plan"),             # resolve_source: files the report must not overwrite
    ("reporting.py", "report.output"),    # report.md, chart, next plan, A/B script
    ("reporting.py", "report.build"),     # data_to_json: the report --json document
    ("rewriting.py", "rewrite.write"),    # commit / settle: the write phase
}


def _reached():
    for path in sorted(API.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typed = {n for node in ast.walk(tree)
                 if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for sub in node.body for n in range(sub.lineno, sub.end_lineno + 1)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.lineno not in typed:
                mods = [node.module] if node.module else [a.name for a in node.names]
                for mod in mods:
                    if mod.split(".")[0] not in LEAVES | {"pipeline", "__version__"}:
                        yield path.name, mod


def test_api_reaches_stages_only_through_pipeline_or_to_render():
    found = set(_reached())
    assert found <= RENDER_WRITE, sorted(found - RENDER_WRITE)
    assert found == RENDER_WRITE       # a use that is gone leaves the list
