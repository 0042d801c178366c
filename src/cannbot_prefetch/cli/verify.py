"""`cannbot prefetch verify PLAN --factory MODULE:FUNC [--out verify.json]`.

FUNC returns `(model, inputs)` built from the rewritten source. Prints a pass/fail table (or JSON);
exit 1 when a check fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from ..errors import CheckFailed
from . import DebugOpt, JsonOpt, LangOpt, check_lang, guarded, make_console, prefetch

_TEXT = {
    "en": {"title": "verify {plan} (torch_npu: {npu})", "check": "check", "site": "site",
           "result": "result", "detail": "detail", "pass": "pass", "fail": "FAIL", "skip": "skip",
           "failed": "{n} check(s) failed", "ok": "all {n} checks passed",
           "stub": "recording stub, this process only", "real": "real"},
    "zh": {"title": "验证 {plan}（torch_npu：{npu}）", "check": "检查项", "site": "位置",
           "result": "结果", "detail": "说明", "pass": "通过", "fail": "失败", "skip": "跳过",
           "failed": "{n} 项检查未通过", "ok": "全部 {n} 项检查通过",
           "stub": "本进程内的记录桩", "real": "真实"},
}


@prefetch.command("verify")
def verify(
    plan: Annotated[Path, typer.Argument(help="The applied prefetch_plan.yaml.")],
    factory: Annotated[str, typer.Option("--factory", help="MODULE:FUNC returning (model, inputs), "
                                         "built from the rewritten source.")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the result as JSON here.")] = None,
    debug: DebugOpt = False,
    as_json: JsonOpt = False,
    lang: LangOpt = "en",
) -> None:
    """Switch off vs on (bit-identical outputs, every site fires as planned) and graph order."""
    t = _TEXT[check_lang(lang)]

    def body() -> None:
        from ..pipeline import verify as run

        result = run(plan, factory, out=out)
        if as_json:
            print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        else:
            table = Table(title=t["title"].format(plan=plan, npu=t["stub" if result.stub else "real"]),
                          box=box.SIMPLE_HEAVY)
            for col in ("check", "site", "result", "detail"):
                table.add_column(t[col], overflow="fold")
            for c in result.checks:
                table.add_row(c.name, c.site or "-",
                              f"[green]{t['pass']}[/]" if c.passed else
                              f"[yellow]{t['skip']}[/]" if c.skipped else f"[red]{t['fail']}[/]",
                              c.detail)
            make_console().print(table)
        failed = [c for c in result.checks if not (c.passed or c.skipped)]
        if failed or not result.checks:
            raise CheckFailed(t["failed"].format(n=len(failed)))
        make_console(stderr=True).print(t["ok"].format(n=len(result.checks)))

    guarded(debug, body)
