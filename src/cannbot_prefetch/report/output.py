"""Render every report output in memory, then write them all at once (atomically, each file).

Files (CONTRACTS.md): `report.md`, the chart `<stem>.roofline.png`, the next-step plan
`prefetch_plan.next.yaml` and the A/B script `run_prefetch_ab.py`, all beside the Markdown.
Nothing is written until everything rendered, so a failure leaves no half report.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..atomic import write_set
from ..errors import InputError
from ..plan import dump_plan
from .abscript import ab_script
from .build import ReportData
from .chart import render_png
from .markdown import render

NEXT_PLAN = "prefetch_plan.next.yaml"
AB_SCRIPT = "run_prefetch_ab.py"
CHART_LABELS = {"x": "arithmetic intensity (FLOP/byte)", "y": "achieved TFLOPS",
                "roof": "roof", "target": "plan targets", "other": "other MatMul-family ops"}


def output_paths(out: Path) -> dict[str, Path]:
    return {"report": out, "chart": out.with_name(f"{out.stem}.roofline.png"),
            "next_plan": out.with_name(NEXT_PLAN), "ab_script": out.with_name(AB_SCRIPT)}


def _rel_to(path: str, folder: Path) -> str:
    p = Path(path).resolve()
    try:
        return os.path.relpath(p, folder.resolve())
    except ValueError:  # another drive
        return str(p)


def render_outputs(d: ReportData, out: Path, lang: str) -> dict[Path, str | bytes]:
    paths = output_paths(out)
    files = {k: p.name for k, p in paths.items() if k != "report"}
    chart = None
    if d.roof is not None:
        title = f"Roofline on {d.roof.name}: baseline {Path(d.baseline.path).name if d.baseline else ''}"
        chart = render_png(list(d.points), d.roof, title, CHART_LABELS)
    else:
        files.pop("chart")
    if d.baseline is None:   # the plan alone: nothing measured, so no next tuning step
        files.pop("next_plan")
    result: dict[Path, str | bytes] = {paths["report"]: render(d, lang, files)}
    if "next_plan" in files:
        result[paths["next_plan"]] = dump_plan(d.next_plan)
    result[paths["ab_script"]] = ab_script(_rel_to(d.plan_path, out.parent), d.plan.switch.name, lang)
    if chart is not None:
        result[paths["chart"]] = chart
    return result


def write_outputs(outputs: dict[Path, str | bytes], keep=()) -> list[str]:
    """Write the set as one unit (atomic.write_set); InputError when an output would replace
    a file in `keep` (the plan, the model files it names: `report --out` must not clobber them)."""
    kept = {Path(k).resolve() for k in keep}
    for path in outputs:
        if Path(path).resolve() in kept:
            raise InputError("report --out would overwrite the plan or a model file it names: "
                             "choose another --out", path=str(path))
    return write_set(outputs)
