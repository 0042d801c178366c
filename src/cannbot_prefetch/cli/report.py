"""`cannbot prefetch report`: parse flags, call api.report, write, render (rich or --json), exit
with the result's status (3 when the report carries a mismatch banner)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from . import Command, DebugOpt, JsonOpt, LangOpt, guarded, parse_steps, make_console, prefetch

@prefetch.command("report", cls=Command)
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
        from ..api import report as run
        from .progress import status

        with status(lang) as tick:
            result = run(plan, baseline, optimized=optimized, verify_result=verify_result,
                         hardware=hardware, rank=rank, steps=parse_steps(steps), progress=tick)
        written = result.write(out, lang)
        return result, written

    result, written = guarded(debug, body, json_out=as_json, lang=lang)
    from ..i18n import t

    data = result.data
    detected = str(data.hardware.get("detected_from") or "")
    if "assum" in detected.lower():
        print(t("cli.warning", lang, text=t("report.assumed_hardware", lang,
                                            name=data.hardware.get("name"), detected=detected)),
              file=sys.stderr)
    if as_json:
        print(json.dumps(result.to_json(written), indent=2, ensure_ascii=False, default=str))
    else:
        from ..report.console import print_summary
        print_summary(data, written, lang, make_console(highlight=False))
    if result.status:
        from ..api.reporting import report_path
        from ..errors import ReportMismatch
        from . import error_text

        mismatch = ReportMismatch(result.mismatch_text(), path=str(report_path(out)),
                                  hint="report written with a mismatch banner")
        print(t("cli.error", lang, text=error_text(mismatch, lang)), file=sys.stderr)
        raise typer.Exit(result.status.exit_code)
