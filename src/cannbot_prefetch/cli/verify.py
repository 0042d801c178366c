"""`cannbot prefetch verify PLAN [--factory MODULE:FUNC | --model-config config.json] [--out verify.json]`.

FUNC returns `(model, inputs)` built from the rewritten source. Without `--factory`, the built-in
factory (verify/factory.py) builds a tiny random model of a transformers-style model file from its
config.json. Prints a pass/fail table (or JSON); exit 1 when a check fails (one line, no "error").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from . import Command, DebugOpt, JsonOpt, LangOpt, guarded, make_console, prefetch

@prefetch.command("verify", cls=Command)
def verify(
    plan: Annotated[Path, typer.Argument(help="The applied prefetch_plan.yaml.")],
    factory: Annotated[str | None, typer.Option("--factory", help="MODULE:FUNC returning (model, inputs), "
                                                "built from the rewritten source. Default: the "
                                                "built-in factory (see --model-config).")] = None,
    model_config: Annotated[Path | None, typer.Option(
        "--model-config", help="config.json for the built-in factory: a tiny random model of the "
                               "plan's transformers-style model file, one decode step with its KV "
                               "cache (default: config.json beside the model file or the plan).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the result as JSON here.")] = None,
    root: Annotated[Path | None, typer.Option(
        "--root", help="Project root: the built-in factory imports only a model file under it "
                       "(default: the git work tree holding the plan, else the plan's folder).")] = None,
    debug: DebugOpt = False,
    as_json: JsonOpt = False,
    lang: LangOpt = "en",
) -> None:
    """Switch off vs on (bit-identical outputs, every site fires as planned), graph order, and
    torch.compile capture in the plan's mode (fullgraph, one prefetch per site in order, no
    recompilation across decode batch sizes)."""
    def body() -> int:
        from rich import box
        from rich.table import Table

        from ..api import verify as run
        from ..i18n import t, texts
        from .progress import status

        with status(lang) as tick:
            result = run(plan, factory, progress=tick, model_config=model_config, root=root)
        if out is not None:
            result.save(out)
        if as_json:
            print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        else:
            npu = t("verify.stub" if result.stub else "verify.real", lang)
            table = Table(title=t("verify.title", lang, plan=plan, npu=npu), box=box.SIMPLE_HEAVY)
            for col in texts("verify.col", lang).values():
                table.add_column(col, overflow="fold")
            word = texts("verify", lang)
            for c in result.checks:
                table.add_row(c.name, c.site or "-",
                              f"[green]{word['pass']}[/]" if c.passed else
                              f"[yellow]{word['skip']}[/]" if c.skipped else f"[red]{word['fail']}[/]",
                              c.detail)
            make_console().print(table)
        failed = [c for c in result.checks if not (c.passed or c.skipped)]
        err = make_console(stderr=True)
        if not result.checks:
            err.print(t("verify.no_checks", lang))
        elif failed:
            err.print(t("verify.failed", lang, n=len(failed)))
        else:
            err.print(t("verify.ok", lang, n=len(result.checks)))
        return result.status.exit_code

    code = guarded(debug, body, json_out=as_json, lang=lang)
    if code:
        raise typer.Exit(code)
