"""`cannbot prefetch report`: parse flags, call pipeline.report, render (rich or --json)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from . import DebugOpt, JsonOpt, LangOpt, guarded, parse_steps, make_console, prefetch

@prefetch.command("report")
def report(
    plan: Annotated[str, typer.Option("--plan", help="The plan (prefetch_plan.yaml) that was applied.")],
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Profile with the switch off. Without it (no profile): the expected gain from the plan's shapes and hardware, 'unknown' where a profile is needed, and the A/B script.")] = None,
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
    """Before/after evidence for a plan, the success rule and the next tuning step.

    A site succeeds only when its target op got faster or the critical path shorter, beyond
    noise, with the window not degraded and the outputs identical (docs/report.md).
    """
    def body():
        from ..errors import ReportMismatch
        from ..pipeline import report as run
        from .progress import status

        try:
            with status(lang) as tick:
                return run(plan, baseline, optimized=optimized, verify_result=verify_result,
                           out=out, lang=lang, hardware=hardware, rank=rank,
                           steps=parse_steps(steps), progress=tick), None
        except ReportMismatch as err:
            result = getattr(err, "result", None)
            if result is None:
                raise
            return result, err

    (data, written, doc), mismatch = guarded(debug, body, json_out=as_json, lang=lang)
    from ..i18n import t

    detected = str(data.hardware.get("detected_from") or "")
    if "assum" in detected.lower():
        print(t("cli.warning", lang, text=t("report.assumed_hardware", lang,
                                            name=data.hardware.get("name"), detected=detected)),
              file=sys.stderr)
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    else:
        from ..report.console import print_summary
        print_summary(data, written, lang, make_console(highlight=False))
    if mismatch is not None:
        from . import error_text
        print(t("cli.error", lang, text=error_text(mismatch, lang)), file=sys.stderr)
        raise typer.Exit(mismatch.exit_code)
