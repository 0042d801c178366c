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

import hashlib
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from . import DebugOpt, JsonOpt, LangOpt, guarded, make_console, prefetch
from ..plan.schema import decode_guard_text


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def _status(site_id: str, changes, done: bool, lang: str) -> str:
    from ..i18n import t

    if site_id in {r.site for r in changes.refused}:
        return f"[red]{t('apply.refused', lang)}[/]"
    if changes.revert:
        return t("apply.removed" if done else "apply.would_remove", lang)
    if site_id in set(changes.applied):
        return t("apply.applied" if done else "apply.would_apply", lang)
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
    for s in plan.sites:
        ins = s.insert
        table.add_row(s.id, f"{s.target.cls}.{s.target.attr}",
                      f"{ins.cls}.{ins.method} {ins.position} {ins.anchor_call}",
                      s.dependency, _mib(s.max_size),
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


def _helper_summary(f) -> dict:
    new = f.new or ""
    return {"action": "remove" if f.new is None else "write" if f.old is None else "update",
            "lines": len(new.splitlines()),
            "sha256": hashlib.sha256(new.encode("utf-8")).hexdigest() if f.new is not None else None}


def _json_doc(changes) -> dict:
    """Changes.to_json with consistent flags: `pending` = changes not written yet, `written` =
    this run wrote them; the helper module is summarised, not shown as a 100-line diff."""
    doc = changes.to_json()
    doc["written"] = bool(changes.written)
    doc["pending"] = bool(changes.pending and not changes.written)
    doc["changed_files"] = [f.path for f in changes.files if f.status == "changed"]
    for fj, f in zip(doc["files"], changes.files):
        if f.kind == "helper" and f.status == "changed":
            fj["diff"] = ""
            fj["helper"] = _helper_summary(f)
    return doc


def _refuse_installed(changes, writing: bool, allow_installed: bool, lang: str) -> list[str]:
    """InputError for a file of an installed package (unless allowed) or a read-only one;
    returns the preview warnings of a dry run."""
    from ..errors import InputError
    from ..i18n import Msg
    from ..rewrite.installed import installed_location, unwritable

    warnings = []
    for f in changes.files:
        if f.status != "changed":
            continue
        name = Path(f.path).name
        where = installed_location(f.path)
        if where is not None and not allow_installed:
            if writing:
                raise InputError(Msg("apply.installed", where=where, path=f.path, name=name),
                                 path=f.path)
            warnings.append(Msg("apply.installed_preview", where=where, path=f.path).render(lang))
        why = unwritable(f.path)
        if why is not None and writing:
            raise InputError(Msg("apply.readonly", why=why, path=f.path, name=name), path=f.path)
    return warnings


@prefetch.command("apply")
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
                                              "plan, else the plan's folder).")] = None,
    debug: DebugOpt = False,
    as_json: JsonOpt = False,
    lang: LangOpt = "en",
) -> None:
    """Rewrite model source from an approved plan: switch-guarded npu_prefetch calls."""
    from ..i18n import t

    err = make_console(stderr=True)
    out = make_console(stderr=as_json)

    def body() -> int:
        from ..errors import InputError
        from ..i18n import Msg
        from ..pipeline import apply_plan, commit_changes, settle_changes

        if write and check:
            raise InputError(Msg("apply.write_and_check"))
        changes = apply_plan(plan, revert=revert, helper=helper, root=root)
        writing = (write or revert) and not check
        changes.warnings.extend(_refuse_installed(changes, writing, allow_installed, lang))
        n = sum(f.status == "changed" for f in changes.files)
        if not as_json:
            _render(changes, lang, err, out)
        # a planned site apply refuses (the source no longer allows it): exit 1, naming it,
        # after the other sites are shown (and written with --write)
        refused = [] if revert else changes.refused
        if refused:
            err.print(t("apply.refused_exit", lang, n=len(refused),
                        sites="; ".join(f"{r.site}: {r.reason}" for r in refused)))
        fail = 1 if refused else 0
        if writing and changes.pending:
            if not (yes or revert):
                if not _interactive():
                    raise InputError(Msg("apply.notty"))
                if not typer.confirm(t("apply.ask", lang, n=n), default=False, err=True):
                    err.print(t("apply.aborted", lang))
                    return _done(changes, as_json, fail)
            commit_changes(changes)
            b = str(Path(changes.backups[0]).parent) if changes.backups else "-"
            err.print(t("apply.reverted" if revert else "apply.wrote", lang, n=n, b=b))
            return _done(changes, as_json, fail)
        if writing:   # nothing to write: still tidy what a killed run left (temp files, status)
            for note in settle_changes(changes):
                err.print(note)
        if check and changes.pending:
            err.print(t("apply.revert_pending" if revert else "apply.pending", lang, n=n))
            return _done(changes, as_json, 1)
        if changes.pending:
            err.print(t("apply.dry", lang))
        return _done(changes, as_json, fail)

    code = guarded(debug, body, json_out=as_json, lang=lang)
    if code:
        raise typer.Exit(code)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _done(changes, as_json: bool, code: int) -> int:
    if as_json:
        print(json.dumps(_json_doc(changes), indent=2, ensure_ascii=False))
    return code
