"""File IO around `rewrite_source`: plan -> per-file results, then (optionally) an atomic write.

`prepare(plan_path, ...)` reads and rewrites in memory and returns `Changes` (nothing written);
`commit(changes)` backs every file up under `.cannbot-prefetch/backup/`, writes each through a
temp file + rename, and puts every file back if any write fails half-way.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from ..errors import InputError, SourceError
from ..plan import Plan, load_plan, resolve_source, save_plan, write_atomic
from .engine import (MARKER, ExistingCall, Refusal, SiteErrors, has_markers, marked_ids,
                     rewrite_source, strip_markers)
from .helper import HELPER_NAME, helper_source, is_ours

BACKUP_DIR = Path(".cannbot-prefetch") / "backup"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class FileResult:
    """One file's outcome. status: changed | unchanged | skipped | failed."""

    path: str
    status: str
    kind: str = "model"                 # model | helper | config
    applied: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    existing: list[ExistingCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    message: str = ""
    old: str | None = None              # None: the file does not exist yet
    new: str | None = None              # None: the file is to be removed

    @property
    def diff(self) -> str:
        if self.status != "changed":
            return ""
        name = Path(self.path).name
        return "".join(difflib.unified_diff(
            (self.old or "").splitlines(keepends=True), (self.new or "").splitlines(keepends=True),
            fromfile=f"a/{name}", tofile=f"b/{name}"))

    def to_json(self) -> dict:
        return {"path": self.path, "kind": self.kind, "status": self.status,
                "applied": self.applied,
                "refused": [{"site": r.site, "reason": r.reason} for r in self.refused],
                "existing_npu_prefetch": [{"line": e.line, "where": e.where, "code": e.code}
                                          for e in self.existing],
                "notes": self.notes, "message": self.message, "diff": self.diff}


@dataclass
class Changes:
    plan_path: Path
    plan: Plan
    revert: bool
    files: list[FileResult]
    warnings: list[str] = field(default_factory=list)
    written: bool = False
    backups: list[str] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        return any(f.status == "changed" for f in self.files)

    @property
    def applied(self) -> list[str]:
        return [s for f in self.files for s in f.applied]

    @property
    def refused(self) -> list[Refusal]:
        return [r for f in self.files for r in f.refused]

    def to_json(self) -> dict:
        return {"plan": str(self.plan_path), "mode": self.plan.mode, "revert": self.revert,
                "pending": self.pending, "written": self.written,
                "applied": self.applied,
                "refused": [{"site": r.site, "reason": r.reason} for r in self.refused],
                "warnings": self.warnings, "backups": self.backups,
                "files": [f.to_json() for f in self.files]}


def _site_names(sites) -> str:
    return ", ".join(s.id for s in sites)


def _check_hash(path: Path, text: str, sites, revert: bool) -> str | None:
    """None when the file is the one planned (or that file with this tool's lines added)."""
    expected = {s.source_sha256 for s in sites if s.source_sha256}
    if not expected:
        return None
    current = _sha(text)
    if current in expected or _sha(strip_markers(text)) in expected:
        return None
    if revert and has_markers(text):
        return None
    return (f"changed since the plan was made (sha256 {current[:12]}..., plan expects "
            f"{sorted(expected)[0][:12]}...; sites: {_site_names(sites)}): re-run analyze on the "
            f"current file")


def _git_dirty(path: Path) -> bool:
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", path.name], cwd=path.parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def _add_yaml_key(text: str, config_path: str, newline: str = "\n") -> str:
    """Add `<config_path>: false` to a YAML text, as marked lines, keeping everything else."""
    parts = config_path.split(".")
    key, parents = parts[-1], parts[:-1]
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    mark = f"  {MARKER}switch{newline}"
    if parents:
        parent = parents[-1]
        for i, ln in enumerate(lines):
            stripped = ln.lstrip(" ")
            if stripped.startswith(parent + ":") and stripped[len(parent) + 1:].strip() in ("", ) :
                indent = len(ln) - len(stripped)
                child = " " * (indent + 2)
                j = i + 1
                while j < len(lines) and (not lines[j].strip() or
                                          len(lines[j]) - len(lines[j].lstrip(" ")) > indent):
                    body = lines[j].lstrip(" ")
                    if body.startswith(key + ":"):
                        return text  # already there
                    if lines[j].strip():
                        child = lines[j][: len(lines[j]) - len(body)]
                    j += 1
                lines.insert(i + 1, f"{child}{key}: false{mark}")
                return "".join(lines)
        block, indent = [], ""
        for p in parents:
            block.append(f"{indent}{p}:{mark}")
            indent += "  "
        block.append(f"{indent}{key}: false{mark}")
        return "".join(lines + block)
    for ln in lines:
        if ln.startswith(key + ":"):
            return text
    return "".join(lines + [f"{key}: false{mark}"])


def prepare(plan_path: str | os.PathLike, *, revert: bool = False,
            helper: str | os.PathLike | None = None) -> Changes:
    """Everything `apply` would do, computed in memory. Raises InputError on bad input."""
    plan_path = Path(plan_path)
    plan = load_plan(plan_path)
    if not plan.sites and not revert:
        raise InputError("the plan has no sites to apply", path=str(plan_path))
    by_file: dict[Path, list] = {}
    for s in plan.sites:
        by_file.setdefault(resolve_source(plan_path, s.target.file).resolve(), []).append(s)
    first = next(iter(by_file), None)
    helper_path = Path(helper).resolve() if helper else (first.parent / HELPER_NAME if first else None)

    results: list[FileResult] = []
    warnings: list[str] = []
    for path, sites in by_file.items():
        if not path.is_file():
            raise SourceError(f"model source not found (sites: {_site_names(sites)})", path=str(path))
        text = path.read_bytes().decode("utf-8")
        problem = _check_hash(path, text, sites, revert)
        backup = _matching_backup(path, sites) if (problem and revert) else None
        if problem and backup is None:
            raise SourceError(problem, path=str(path))
        if revert:
            new = backup if backup is not None else strip_markers(text)
            results.append(FileResult(str(path), "changed" if new != text else "unchanged",
                                      old=text, new=new))
            continue
        module = None
        if helper_path is not None and helper_path.parent != path.parent:
            module = helper_path.stem
            warnings.append(f"{path.name} imports the helper as `{module}`: keep "
                            f"{helper_path.parent} on sys.path")
        try:
            out = rewrite_source(text, sites, mode=plan.mode, switch=plan.switch, helper_module=module)
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"does not parse ({str(exc).splitlines()[0]}; sites: "
                              f"{_site_names(sites)})", path=str(path)) from None
        except SiteErrors as exc:
            raise SourceError("; ".join(f"site {sid}: {msg}" for sid, msg in exc.problems),
                              path=str(path)) from None
        status = "changed" if out.code != text else "unchanged"
        fr = FileResult(str(path), status, applied=out.applied, refused=out.refused,
                        existing=out.existing, notes=out.notes, old=text, new=out.code)
        if out.had_markers:
            fr.notes.append(f"already applied (markers for {', '.join(sorted(marked_ids(text)))}): "
                            f"re-applied in place" if status == "changed" else
                            "already applied by this plan: nothing to change")
        results.append(fr)
        if status == "changed" and _git_dirty(path):
            warnings.append(f"{path} has uncommitted changes in git: commit or stash them so the "
                            f"rewrite can be reviewed on its own")

    any_applied = any(r.applied for r in results)
    if helper_path is not None:
        old = helper_path.read_text(encoding="utf-8") if helper_path.is_file() else None
        if old is not None and not is_ours(old):
            raise InputError("exists and was not written by cannbot-prefetch: choose another "
                             "--helper path", path=str(helper_path))
        if revert:
            new = None
        elif any_applied:
            new = helper_source(plan.mode, plan.switch.config_path, plan.switch.default)
        else:
            new = old
        status = "unchanged" if new == old else "changed"
        results.append(FileResult(str(helper_path), status, kind="helper", old=old, new=new))

    if plan.switch.config_file:
        cfg = resolve_source(plan_path, plan.switch.config_file)
        if not cfg.is_file():
            raise InputError("switch.config_file not found", path=str(cfg))
        old = cfg.read_text(encoding="utf-8")
        new = strip_markers(old) if revert else (_add_yaml_key(old, plan.switch.config_path)
                                                 if any_applied else old)
        results.append(FileResult(str(cfg), "changed" if new != old else "unchanged",
                                  kind="config", old=old, new=new))
    return Changes(plan_path, plan, revert, results, warnings)


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _backup(path: Path, text: str, stamp: str) -> Path:
    dest = path.parent / BACKUP_DIR / f"{path.name}.{stamp}.bak"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8", newline="")
    return dest


def commit(changes: Changes) -> Changes:
    """Write the changed files (backups first); on any failure every file is put back."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    todo = [f for f in changes.files if f.status == "changed"]
    for f in todo:
        if f.old is not None:
            changes.backups.append(str(_backup(Path(f.path), f.old, stamp)))
    done: list[FileResult] = []
    try:
        for f in todo:
            p = Path(f.path)
            if f.new is None:
                p.unlink(missing_ok=True)
            else:
                mode = p.stat().st_mode & 0o7777 if p.exists() else _default_mode()
                write_atomic(p, f.new)
                os.chmod(p, mode)
            done.append(f)
        save_plan(changes.plan.with_status("proposed" if changes.revert else "applied"),
                  changes.plan_path)
    except BaseException:
        for f in done:
            p = Path(f.path)
            if f.old is None:
                p.unlink(missing_ok=True)
            else:
                write_atomic(p, f.old)
        raise
    changes.written = True
    return changes


def _matching_backup(path: Path, sites) -> str | None:
    """The newest backup of `path` that is the planned file (for --revert when markers are gone)."""
    expected = {s.source_sha256 for s in sites if s.source_sha256}
    folder = path.parent / BACKUP_DIR
    for b in sorted(folder.glob(f"{path.name}.*.bak"), reverse=True) if folder.is_dir() else []:
        text = b.read_bytes().decode("utf-8")
        if _sha(text) in expected:
            return text
    return None
