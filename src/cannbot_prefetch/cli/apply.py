"""`cannbot prefetch apply PLAN [--write] [--yes] [--check] [--revert] [--helper PATH] [--root DIR]`.

Every run first shows the design table and the diff (nothing written). Then:
- no flag: a dry run ("would apply");
- `--write`: asks "Write these changes?" (`--yes` for scripts; without a terminal it refuses
  unless `--yes`), then writes, backups first;
- `--check`: exit 1 when changes are pending (the normal CI answer, not an error), else 0;
- `--revert`: takes out what apply inserted (by its markers) or restores the backup, at once
  (it only removes this tool's own lines; the current files are backed up first);
  `--revert --check` previews it.
Files of an installed package (site-packages) are refused unless `--allow-installed`.
A planned site that apply refuses (the source no longer allows it) exits 1 with the site and
the reason; the other sites are still shown, and written with --write.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..fmt import mib
from . import Command, DebugOpt, JsonOpt, LangOpt, guarded, make_console, prefetch


def _status(site_id: str, changes, done: bool, lang: str) -> str:
    from ..i18n import t

    if site_id in {r.site for r in changes.refused}:
        return f"[red]{t('apply.refused', lang)}[/]"
    if changes.revert:
        return t("apply.removed" if done else "apply.would_remove", lang)
    if site_id in set(changes.applied):
        # in a file apply leaves as it is, the site is there already (a re-run, --check)
        present = any(site_id in f.applied and f.status == "unchanged" for f in changes.files)
        return t("apply.applied" if done or present else "apply.would_apply", lang)
    return "-"


def _render(changes, lang: str, err, out, done: bool = False) -> None:
    """The design table, then each file's diff (the helper module summarised), then notes."""
    from rich import box
    from rich.syntax import Syntax
    from rich.table import Table

    from ..i18n import t, texts

    plan = changes.plan
    col = texts("apply.col", lang)
    table = Table(title=t("apply.title", lang, mode=plan.mode, path=plan.switch.config_path),
                  box=box.SIMPLE_HEAVY)
    for key in ("site", "target", "where", "dep", "size", "tokens", "status"):
        table.add_column(col[key], overflow="fold")
    from ..contract.plan import decode_guard_text  # the plan's leaf only when a table is shown

    for s in plan.sites:
        ins = s.insert
        table.add_row(s.id, f"{s.target.cls}.{s.target.attr}",
                      f"{ins.cls}.{ins.method} {ins.position} {ins.anchor_call}",
                      s.dependency, mib(s.max_size),
                      decode_guard_text(s),
                      _status(s.id, changes, done, lang))
    out.print(table)
    design = Path(changes.plan_path).with_name("prefetch_design.md")
    if design.is_file():
        err.print(f"{t('apply.design', lang)}: {design}")
    for r in changes.refused:
        err.print(t("apply.refused_line", lang, site=r.site, reason=r.reason))
    for f in changes.files:
        for note in f.notes:
            err.print(t("apply.note_line", lang, file=Path(f.path).name, text=note))
    for w in changes.warnings:
        err.print(f"[yellow]{t('cli.warning', lang, text=w)}[/]")
    any_diff = False
    for f in changes.files:
        if f.diff and f.kind == "helper":
            any_diff = True
            verb = "remove" if f.new is None else "write" if f.old is None else "update"
            out.print(t(f"apply.helper.{verb}", lang, path=f.path,
                        lines=len((f.new or "").splitlines())))
        elif f.diff:
            any_diff = True
            out.print(Syntax(f.diff, "diff", theme="ansi_dark", background_color="default",
                             word_wrap=True))
    if not any_diff:
        out.print(t("apply.none", lang))


@prefetch.command("apply", cls=Command)
def apply(
    plan: Annotated[Path, typer.Argument(help="prefetch_plan.yaml written by analyze.")],
    write: Annotated[bool, typer.Option("--write", help="Write the changes (shows them, then asks).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before writing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when changes are pending (CI); writes nothing.")] = False,
    revert: Annotated[bool, typer.Option("--revert", help="Take the inserted code out again, now (with --check: only preview).")] = False,
    helper: Annotated[Path | None, typer.Option("--helper", help="Where to write _cannbot_prefetch.py "
                                                "(default: next to the first model file).")] = None,
    allow_installed: Annotated[bool, typer.Option(
        "--allow-installed", help="Allow writing into an installed package (site-packages); "
                                  "by default apply refuses and says how to copy the file.")] = False,
    root: Annotated[Path | None, typer.Option("--root", help="Project root: the plan's files must lie "
                                              "under it (default: the git work tree holding the "
                                              "current folder, else the current folder).")] = None,
    debug: DebugOpt = False,
    as_json: JsonOpt = False,
    lang: LangOpt = "en",
) -> None:
    """Rewrite model source from an approved plan: switch-guarded npu_prefetch calls."""
    from ..i18n import t

    err = make_console(stderr=True)
    out = make_console(stderr=as_json)

    def body() -> int:
        from .. import api
        from ..errors import InputError
        from ..i18n import Msg

        if write and check:
            raise InputError(Msg("apply.write_and_check"))
        kw = dict(helper=helper, root=root, allow_installed=allow_installed, lang=lang)
        if check:
            rw = api.check(plan, revert=revert, **kw)
        else:
            rw = (api.revert if revert else api.apply)(plan, **kw)
        writing = (write or revert) and not check
        if writing:
            rw.ensure_writable()
        n = sum(f.status == "changed" for f in rw.files)
        if not as_json:
            _render(rw.changes, lang, err, out)
        # a planned site apply refuses (the source no longer allows it): exit 1 (Rewrite.status),
        # naming it, after the other sites are shown (and written with --write)
        if rw.refused_sites:
            err.print(t("apply.refused_exit", lang, n=len(rw.refused_sites),
                        sites="; ".join(f"{r.site}: {r.reason}" for r in rw.refused_sites)))
        if writing and rw.pending:
            if not (yes or revert):
                if not _interactive():
                    raise InputError(Msg("apply.notty"))
                if not typer.confirm(t("apply.ask", lang, n=n), default=False, err=True):
                    err.print(t("apply.aborted", lang))
                    return _done(rw, as_json)
            rw.write()
            b = str(Path(rw.changes.backups[0]).parent) if rw.changes.backups else "-"
            err.print(t("apply.reverted" if revert else "apply.wrote", lang, n=n, b=b))
            return _done(rw, as_json)
        if writing:   # nothing to write: still tidy what a killed run left (temp files, status)
            for note in rw.write():
                err.print(note)
        if rw.check and rw.pending:
            err.print(t("apply.revert_pending" if revert else "apply.pending", lang, n=n))
            return _done(rw, as_json)
        if rw.pending:
            err.print(t("apply.dry", lang))
        return _done(rw, as_json)

    code = guarded(debug, body, json_out=as_json, lang=lang)
    if code:
        raise typer.Exit(code)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _done(rw, as_json: bool) -> int:
    if as_json:
        print(json.dumps(rw.to_json(), indent=2, ensure_ascii=False))
    return rw.status.exit_code
