"""`cannbot prefetch report`: parse flags, call pipeline.report, render (rich or --json)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from ..errors import ReportMismatch
from . import DebugOpt, JsonOpt, LangOpt, check_lang, guarded, parse_steps, make_console, prefetch



@prefetch.command("report")
def report(
    plan: Annotated[str, typer.Option("--plan", help="The plan (prefetch_plan.yaml) that was applied.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Profile with the switch off.")],
    optimized: Annotated[Optional[str], typer.Option("--optimized", help="Profile with the switch on. Without it: expected-gain analysis only.")] = None,
    verify_result: Annotated[Optional[str], typer.Option("--verify-result", help="verify.json from `cannbot prefetch verify`.")] = None,
    out: Annotated[str, typer.Option("--out", help="Markdown report path; the chart, next plan and A/B script go beside it.")] = "report.md",
    hardware: Annotated[Optional[str], typer.Option(help="Part name or hardware YAML file for the expected gain and the roofline chart (default: the plan's, created_from.hardware, with its overrides).")] = None,
    rank: Annotated[Optional[int], typer.Option(help="Rank when a profile folder holds several.")] = None,
    steps: Annotated[Optional[str], typer.Option(help="Steps A:B (inclusive) of both profiles. Default: all but the first.")] = None,
    lang: LangOpt = "en",
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Before/after evidence for a plan, the seed's success rule, and the next tuning step."""
    check_lang(lang)

    def body():
        from ..pipeline import report as run
        try:
            return run(plan, baseline, optimized=optimized, verify_result=verify_result, out=out,
                       lang=lang, hardware=hardware, rank=rank, steps=parse_steps(steps)), None
        except ReportMismatch as err:
            result = getattr(err, "result", None)
            if result is None:
                raise
            return result, err

    (data, written, doc), mismatch = guarded(debug, body)
    detected = str(data.hardware.get("detected_from") or "")
    if "assum" in detected.lower():
        print(f"warning: hardware {data.hardware.get('name')}: {detected} (pass --hardware to choose)",
              file=sys.stderr)
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    else:
        from ..report.console import print_summary
        print_summary(data, written, lang, make_console(highlight=False))
    if mismatch is not None:
        print(f"error: {mismatch}", file=sys.stderr)
        raise typer.Exit(mismatch.exit_code)
