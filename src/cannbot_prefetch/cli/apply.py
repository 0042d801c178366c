"""`cannbot prefetch apply PLAN [--write] [--yes] [--check] [--revert] [--helper PATH]`.

Without --write: the design summary and a coloured diff, nothing written. --write asks first
(--yes for scripts; without a terminal it refuses unless --yes). --check exits 1 when changes are
pending. --revert takes out what apply inserted (by its markers) or restores the backup.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.syntax import Syntax
from rich.table import Table

from ..errors import CheckFailed, InputError
from rich.console import Console

from . import DebugOpt, JsonOpt, LangOpt, check_lang, guarded, make_console, prefetch

_TEXT = {
    "en": {"title": "Prefetch design ({mode} mode, switch {path}, default off)",
           "site": "site", "target": "target", "where": "inserted in", "dep": "dependency",
           "size": "max_size", "tokens": "max tokens", "status": "status",
           "applied": "applied", "refused": "refused", "none": "nothing to change",
           "dry": "dry run: nothing written. Write it with --write.",
           "ask": "Write these changes to {n} file(s)?", "wrote": "wrote {n} file(s); backups in {b}",
           "notty": "--write needs a confirmation and there is no terminal: pass --yes",
           "pending": "{n} file(s) would change", "aborted": "nothing written",
           "reverted": "reverted {n} file(s)", "design": "full design"},
    "zh": {"title": "预取方案（{mode} 模式，开关 {path}，默认关闭）",
           "site": "位置", "target": "目标", "where": "插入于", "dep": "依赖",
           "size": "max_size", "tokens": "最大 token 数", "status": "状态",
           "applied": "已插入", "refused": "已拒绝", "none": "无需修改",
           "dry": "预览：未写入任何文件。使用 --write 写入。",
           "ask": "将这些修改写入 {n} 个文件？", "wrote": "已写入 {n} 个文件；备份在 {b}",
           "notty": "--write 需要确认，但当前没有终端：请加 --yes",
           "pending": "{n} 个文件待修改", "aborted": "未写入任何文件",
           "reverted": "已还原 {n} 个文件", "design": "完整方案"},
}


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def _render(changes, t: dict, err: Console, out: Console) -> None:
    plan = changes.plan
    table = Table(title=t["title"].format(mode=plan.mode, path=plan.switch.config_path),
                  box=box.SIMPLE_HEAVY)
    for col in ("site", "target", "where", "dep", "size", "tokens", "status"):
        table.add_column(t[col], overflow="fold")
    applied = set(changes.applied)
    refused = {r.site: r.reason for r in changes.refused}
    for s in plan.sites:
        status = (t["applied"] if s.id in applied else
                  f"[red]{t['refused']}[/]" if s.id in refused else "-")
        ins = s.insert
        table.add_row(s.id, f"{s.target.cls}.{s.target.attr}",
                      f"{ins.cls}.{ins.method} {ins.position} {ins.anchor_call}",
                      s.dependency, _mib(s.max_size),
                      "-" if s.max_tokens is None else str(s.max_tokens), status)
    out.print(table)
    design = Path(changes.plan_path).with_name("prefetch_design.md")
    if design.is_file():
        err.print(f"{t['design']}: {design}")
    for sid, reason in refused.items():
        err.print(f"[yellow]refused[/] {sid}: {reason}")
    for f in changes.files:
        for note in f.notes:
            err.print(f"note: {Path(f.path).name}: {note}")
    for w in changes.warnings:
        err.print(f"[yellow]warning:[/] {w}")
    any_diff = False
    for f in changes.files:
        if f.diff and f.kind == "helper":
            any_diff = True
            verb = "remove" if f.new is None else "write" if f.old is None else "update"
            out.print(f"[bold]{verb}[/] helper module {f.path}")
        elif f.diff:
            any_diff = True
            out.print(Syntax(f.diff, "diff", theme="ansi_dark", background_color="default",
                             word_wrap=True))
    if not any_diff:
        out.print(t["none"])


@prefetch.command("apply")
def apply(
    plan: Annotated[Path, typer.Argument(help="prefetch_plan.yaml written by analyze.")],
    write: Annotated[bool, typer.Option("--write", help="Write the changes (asks first).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before writing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when changes are pending (CI).")] = False,
    revert: Annotated[bool, typer.Option("--revert", help="Take the inserted code out again.")] = False,
    helper: Annotated[Path | None, typer.Option("--helper", help="Where to write _cannbot_prefetch.py "
                                                "(default: next to the first model file).")] = None,
    debug: DebugOpt = False,
    as_json: JsonOpt = False,
    lang: LangOpt = "en",
) -> None:
    """Rewrite model source from an approved plan: switch-guarded npu_prefetch calls."""
    t = _TEXT[check_lang(lang)]
    err = make_console(stderr=True)
    out = make_console(stderr=as_json)

    def confirm(changes) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError(t["notty"])
        n = sum(f.status == "changed" for f in changes.files)
        return typer.confirm(t["ask"].format(n=n), default=False, err=True)

    def body() -> None:
        from ..pipeline import apply_plan

        if write and check:
            raise InputError("--write and --check do not go together")
        changes = apply_plan(plan, write=write, revert=revert, helper=helper, confirm=confirm)
        if as_json:
            print(json.dumps(changes.to_json(), indent=2, ensure_ascii=False))
        else:
            _render(changes, t, err, out)
        n = sum(f.status == "changed" for f in changes.files)
        if check and changes.pending:
            raise CheckFailed(t["pending"].format(n=n))
        if write and changes.pending:
            if changes.written:
                key = "reverted" if revert else "wrote"
                b = str(Path(changes.backups[0]).parent) if changes.backups else "-"
                err.print(t[key].format(n=n, b=b))
            else:
                err.print(t["aborted"])
        elif changes.pending and not check:
            err.print(t["dry"])

    guarded(debug, body)
