"""File IO around `rewrite_source`: plan -> per-file results, then (optionally) an atomic write.

`prepare(plan_path, ...)` reads and rewrites in memory and returns `Changes` (nothing written);
`commit(changes)` locks the file set, checks nothing changed since `prepare`, backs every file up
under `.cannbot-prefetch/backup/`, writes each through a temp file + rename (mode kept), and puts
every file back if any write fails half-way.

Safety rules (issue 11; CONTRACTS "Plan fields are data"):
- every target and config file lies under the project root: `--root`, else the git work tree
  holding the plan, else the plan's folder (checked on the path as written and on the file a
  symlink leads to);
- a symlinked model file is written through (the link stays) and the helper goes next to the
  path that is imported, the link's own folder (`from . import` resolves there);
- one file, one plan: a file that carries another plan's sites is refused (exit 1), and so is a
  file that changed between prepare and commit (a concurrent apply); the commit holds a lock;
- order: the helper first, then the config, then the models, then the plan's status, so a kill
  at any point leaves every file whole and no model importing a helper that is not there;
  revert goes the other way; temp files a killed run left are removed by the next run;
- the plan's status follows the files, also when a killed run left them applied.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from ..errors import Conflict, InputError, SourceError
from ..plan import Plan, grammar, load_plan, save_plan, write_atomic
from ..plan.store import TMP_MARK, new_file_mode, stale_temps
from ..pysource import source_lines
from .engine import ExistingCall, Refusal, SiteErrors, UnsafeOutput, rewrite_source
from .helper import HELPER_NAME, helper_source, is_ours
from .markers import (IMPORT_TAG, JOIN_TAG, LINK_TAG, MARKER, SWITCH_TAG, has_markers, marked_ids,
                      strip_ids, strip_markers, strip_yaml_markers)

STATE_DIR = Path(".cannbot-prefetch")
BACKUP_DIR = STATE_DIR / "backup"
LOCK_NAME = "lock"
LOCK_WAIT_S = 60.0
SHARED_TAGS = {IMPORT_TAG, SWITCH_TAG, JOIN_TAG, LINK_TAG}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class FileResult:
    """One file's outcome. status: changed | unchanged | skipped | failed."""

    path: str                           # as the plan names it (a symlink stays a symlink)
    status: str
    kind: str = "model"                 # model | helper | config
    applied: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    existing: list[ExistingCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    message: str = ""
    old: str | None = None              # None: the file does not exist yet
    new: str | None = None              # None: the file is to be removed
    real: str = ""                      # the file written (a symlink's target); "" = path
    stale: list[str] = field(default_factory=list)   # temp files a killed run left

    @property
    def write_path(self) -> Path:
        return Path(self.real or self.path)

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
    root: str = ""
    status_after: str = "proposed"      # the plan status the files have after this run

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
                "pending": self.pending, "written": self.written, "root": self.root,
                "status": self.status_after,
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


def _insert_lines(text: str, at: int, new: list[str], nl: str) -> str:
    """`new` (lines without endings) put before line index `at` (len = at the end); a text
    without a final newline still ends without one (strip_yaml_markers undoes exactly this)."""
    lines = source_lines(text)
    out = lines[:at]
    if out and not out[-1].endswith(("\n", "\r")):
        out[-1] += nl
    out += [ln + nl for ln in new]
    out += lines[at:]
    if lines and at == len(lines) and not lines[-1].endswith(("\n", "\r")):
        out[-1] = out[-1][: -len(nl)]
    return "".join(out)


def _add_yaml_key(text: str, config_path: str) -> str:
    """Add `<config_path>: false` to a YAML text, as marked lines, keeping everything else.
    `config_path` passed the plan grammar (identifiers and dots: one line, nothing to quote)."""
    if not grammar.is_dotted(config_path):
        raise InputError(f"switch.config_path {config_path!r} is not a dotted name")
    parts = config_path.split(".")
    key, parents = parts[-1], parts[:-1]
    lines = source_lines(text)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    mark = f"  {MARKER}switch"
    if parents:
        parent = parents[-1]
        for i, ln in enumerate(lines):
            stripped = ln.lstrip(" ")
            if stripped.startswith(parent + ":") and not stripped[len(parent) + 1:].strip():
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
                return _insert_lines(text, i + 1, [f"{child}{key}: false{mark}"], nl)
        block, indent = [], ""
        for p in parents:
            block.append(f"{indent}{p}:{mark}")
            indent += "  "
        block.append(f"{indent}{key}: false{mark}")
        return _insert_lines(text, len(lines), block, nl)
    for ln in lines:
        if ln.startswith(key + ":"):
            return text
    return _insert_lines(text, len(lines), [f"{key}: false{mark}"], nl)


# ---------------------------------------------------------------- where files may be

def _git_top(folder: Path) -> Path | None:
    for d in (folder, *folder.parents):
        if (d / ".git").exists():
            return d
    return None


def project_root(plan_path: Path, root: str | os.PathLike | None = None) -> Path:
    """`--root`, else the git work tree that holds the plan, else the plan's folder."""
    if root is not None:
        r = Path(root)
        if not r.is_dir():
            raise InputError("--root is not a folder", path=str(r))
        return r.resolve()
    folder = plan_path.resolve().parent
    return _git_top(folder) or folder


def _lexical(plan_path: Path, file: str) -> Path:
    """A plan path made absolute against the plan's folder, `..` folded, symlinks kept."""
    f = Path(file)
    base = plan_path.absolute().parent
    return Path(os.path.normpath(f if f.is_absolute() else base / f))


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _under_root(plan_path: Path, file: str, root: Path, what: str) -> tuple[Path, Path]:
    """(the path as imported, the file it leads to); InputError when either is outside root."""
    lex = _lexical(plan_path, file)
    real = lex.resolve()
    root_lex = Path(os.path.normpath(root.absolute()))
    if not (_inside(real, root) and (_inside(lex, root_lex) or _inside(lex, root))):
        raise InputError(f"{what} {file!r} lies outside the project root {root} (the plan's "
                         f"folder, or the git work tree holding it): a plan may only touch files "
                         f"under it; pass --root to name the project", path=str(plan_path))
    return lex, real


# ---------------------------------------------------------------- prepare

def _foreign(text: str, ids: set[str]) -> set[str]:
    """Site ids of marked lines in `text` that this plan does not have (another plan's)."""
    return marked_ids(text) - ids - SHARED_TAGS


def _other_users(helper_path: Path, mine: set[Path]) -> list[Path]:
    """Other model files in the helper's folder that import it (another plan's)."""
    out = []
    for f in sorted(helper_path.parent.glob("*.py")):
        if f == helper_path or f.absolute() in mine or f.resolve() in mine:
            continue
        try:
            if f.stat().st_size > (8 << 20):
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "_cannbot_prefetch" in text and f"{MARKER}{IMPORT_TAG}" in text and has_markers(text):
            out.append(f)
    return out


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{what} is not UTF-8 text (byte {exc.start})", path=str(path)) from None
    except OSError as exc:
        raise SourceError(f"{what} cannot be read ({exc.strerror})", path=str(path)) from None


def prepare(plan_path: str | os.PathLike, *, revert: bool = False,
            helper: str | os.PathLike | None = None,
            root: str | os.PathLike | None = None) -> Changes:
    """Everything `apply` would do, computed in memory. Raises InputError on bad input and
    Conflict when a file carries another plan's sites."""
    plan_path = Path(plan_path)
    plan = load_plan(plan_path)
    if not plan.sites and not revert:
        raise InputError("the plan has no sites to apply", path=str(plan_path))
    top = project_root(plan_path, root)
    by_file: dict[Path, list] = {}
    imported: dict[Path, Path] = {}
    for s in plan.sites:
        lex, real = _under_root(plan_path, s.target.file, top, f"site {s.id}: target.file")
        by_file.setdefault(real, []).append(s)
        imported.setdefault(real, lex)
    first = next(iter(by_file), None)
    if helper is not None and not grammar.is_identifier(Path(helper).stem):
        raise InputError("--helper must name a file whose stem is a Python identifier (it is "
                         "imported by that name)", path=str(helper))
    helper_path = (Path(helper).absolute() if helper else
                   (imported[first].parent / HELPER_NAME if first else None))
    ids = {s.id for s in plan.sites}

    results: list[FileResult] = []
    warnings: list[str] = []
    still_used: list[str] = []        # our files that keep another plan's sites after a revert
    for path, sites in by_file.items():
        shown = imported[path]
        if not path.is_file():
            raise SourceError(f"model source not found (sites: {_site_names(sites)})", path=str(shown))
        raw = _read_text(path, "model source")
        problem = _check_hash(path, raw, sites, revert)
        backup = _matching_backup(path, sites) if (problem and revert) else None
        if problem and backup is None:
            raise SourceError(problem, path=str(shown))
        others = _foreign(raw, ids)
        real = str(path) if path != shown else ""
        stale = [str(t) for t in stale_temps(path)]
        if stale:
            warnings.append(f"{shown.name}: {len(stale)} temp file(s) left by a killed run "
                            f"(removed by --write)")
        if revert:
            if others:   # another plan's sites stay, with the shared lines they need
                new = backup if backup is not None else strip_ids(raw, ids)
            else:
                new = backup if backup is not None else strip_markers(raw)
            fr = FileResult(str(shown), "changed" if new != raw else "unchanged",
                            old=raw, new=new, real=real, stale=stale)
            if others:
                fr.notes.append(f"kept the lines of site(s) {', '.join(sorted(others))}: another "
                                f"plan wrote them")
                still_used.append(shown.name)
            results.append(fr)
            continue
        if others:
            raise Conflict(f"carries site(s) {', '.join(sorted(others))} that this plan does not "
                           f"have (another plan applied them): revert that plan first "
                           f"(`apply OTHER_PLAN --revert --write`), or put all the sites in one "
                           f"plan; nothing written", path=str(shown))
        module = None
        if helper_path is not None and helper_path.parent != shown.parent:
            module = helper_path.stem
            warnings.append(f"{shown.name} imports the helper as `{module}`: keep "
                            f"{helper_path.parent} on sys.path")
        try:
            out = rewrite_source(raw, sites, mode=plan.mode, switch=plan.switch, helper_module=module)
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"does not parse ({str(exc).splitlines()[0]}; sites: "
                              f"{_site_names(sites)})", path=str(shown)) from None
        except SiteErrors as exc:
            raise SourceError("; ".join(f"site {sid}: {msg}" for sid, msg in exc.problems),
                              path=str(shown)) from None
        except UnsafeOutput as exc:
            raise SourceError(f"{exc} (sites: {', '.join(exc.sites)})", path=str(shown)) from None
        status = "changed" if out.code != raw else "unchanged"
        fr = FileResult(str(shown), status, applied=out.applied, refused=out.refused,
                        existing=out.existing, notes=out.notes, old=raw, new=out.code, real=real,
                        stale=stale)
        if out.had_markers:
            fr.notes.append(f"already applied (markers for {', '.join(sorted(marked_ids(raw)))}): "
                            f"re-applied in place" if status == "changed" else
                            "already applied by this plan: nothing to change")
        results.append(fr)
        if status == "changed" and _git_dirty(path):
            warnings.append(f"{shown} has uncommitted changes in git: commit or stash them so the "
                            f"rewrite can be reviewed on its own")

    any_applied = any(r.applied for r in results)
    if helper_path is not None:
        old = _read_text(helper_path, "helper") if helper_path.is_file() else None
        if old is not None and not is_ours(old):
            raise InputError("exists and was not written by cannbot-prefetch: choose another "
                             "--helper path", path=str(helper_path))
        users = _other_users(helper_path, set(by_file) | set(imported.values())) if old else []
        users_named = [u.name for u in users] + still_used
        if revert:
            new = old if users_named else None
        elif any_applied:
            new = helper_source(plan.mode, plan.switch.config_path, plan.switch.default)
            if users and old is not None and new != old:
                raise Conflict(f"is shared with {', '.join(u.name for u in users)} (another "
                               f"plan's sites), which this plan's mode/switch would change: "
                               f"revert that plan first or use --helper; nothing written",
                               path=str(helper_path))
        else:
            new = old
        status = "unchanged" if new == old else "changed"
        fr = FileResult(str(helper_path), status, kind="helper", old=old, new=new,
                        stale=[str(t) for t in stale_temps(helper_path)])
        if revert and users_named and old is not None:
            fr.notes.append(f"kept: {', '.join(users_named)} still import it")
        results.append(fr)

    if plan.switch.config_file:
        lex, cfg = _under_root(plan_path, plan.switch.config_file, top, "switch.config_file")
        if not cfg.is_file():
            raise InputError("switch.config_file not found", path=str(lex))
        old = _read_text(cfg, "switch.config_file")
        new = strip_yaml_markers(old) if revert else (_add_yaml_key(old, plan.switch.config_path)
                                                      if any_applied else old)
        results.append(FileResult(str(lex), "changed" if new != old else "unchanged",
                                  kind="config", old=old, new=new,
                                  real=str(cfg) if cfg != lex else "",
                                  stale=[str(t) for t in stale_temps(cfg)]))
    status_after = "applied" if (not revert and any_applied) else "proposed"
    return Changes(plan_path, plan, revert, results, warnings, root=str(top),
                   status_after=status_after)


# ---------------------------------------------------------------- commit

@contextlib.contextmanager
def locked(folders):
    """Hold `<folder>/.cannbot-prefetch/lock` for every folder (sorted: no deadlock between two
    runs), waiting up to LOCK_WAIT_S for another apply to finish; Conflict after that."""
    held = []
    try:
        for folder in sorted({Path(f) for f in folders}):
            lock = folder / STATE_DIR / LOCK_NAME
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            held.append(fd)
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise Conflict("another `cannbot prefetch apply` holds the lock; nothing "
                                       "written", path=str(lock)) from None
                    time.sleep(0.05)
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)       # closing releases the lock


def _backup(path: Path, text: str, stamp: str) -> Path:
    dest = path.parent / BACKUP_DIR / f"{path.name}.{stamp}.bak"
    write_atomic(dest, text)
    return dest


_ORDER = {"helper": 0, "config": 1, "model": 2}


def commit(changes: Changes) -> Changes:
    """Write the changed files (backups first); on any failure every file is put back.

    Under the lock: leftovers of a killed run are removed, and every file must still be what
    prepare read (else Conflict: another run changed it in between)."""
    files = changes.files
    folders = {f.write_path.parent for f in files} | {Path(changes.plan_path).absolute().parent}
    with locked(folders):
        for f in files:
            p = f.write_path
            now = _read_text(p, f.kind) if p.is_file() else None
            if now != f.old:
                raise Conflict("changed while this apply ran (another apply or an editor): "
                               "nothing written; run it again", path=f.path)
        for t in _stale(changes):
            t.unlink(missing_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        # revert: models first, the helper last; apply: the helper first, the models last
        todo = sorted((f for f in files if f.status == "changed"),
                      key=lambda f: _ORDER[f.kind] * (-1 if changes.revert else 1))
        for f in todo:
            if f.old is not None:
                changes.backups.append(str(_backup(f.write_path, f.old, stamp)))
        done: list[FileResult] = []
        try:
            for f in todo:
                p = f.write_path
                if f.new is None:
                    p.unlink(missing_ok=True)
                else:
                    write_atomic(p, f.new)
                done.append(f)
            save_plan(changes.plan.with_status(changes.status_after), changes.plan_path)
        except BaseException:
            for f in reversed(done):
                p = f.write_path
                if f.old is None:
                    p.unlink(missing_ok=True)
                else:
                    write_atomic(p, f.old, mode=None if p.exists() else new_file_mode())
            raise
    changes.written = True
    return changes


def _stale(changes: Changes) -> set[Path]:
    """Temp files a killed run left: of the files in the set, their backups, and the plan."""
    out = {Path(t) for f in changes.files for t in f.stale}
    out |= set(stale_temps(Path(changes.plan_path).absolute()))
    for f in changes.files:
        p = f.write_path
        backups = p.parent / BACKUP_DIR
        if backups.is_dir():
            out |= set(backups.glob(f".{p.name}.*.bak{TMP_MARK}*"))
    return out


def settle(changes: Changes) -> list[str]:
    """Nothing to write to the files, but a killed run may have left temp files, or the plan's
    status behind the files (killed after the models, before the plan): tidy both, under the
    lock. Returns what was done, for the user."""
    done = []
    stale = _stale(changes)
    if not stale and changes.plan.status == changes.status_after:
        return done
    folders = {f.write_path.parent for f in changes.files} | {Path(changes.plan_path).absolute().parent}
    with locked(folders):
        for t in stale:
            t.unlink(missing_ok=True)
        if stale:
            done.append(f"removed {len(stale)} temp file(s) a killed run left")
        if changes.plan.status != changes.status_after:
            save_plan(changes.plan.with_status(changes.status_after), changes.plan_path)
            done.append(f"plan status set to {changes.status_after}, as the files are")
    return done


def _matching_backup(path: Path, sites) -> str | None:
    """The newest backup of `path` that is the planned file (for --revert when markers are gone)."""
    expected = {s.source_sha256 for s in sites if s.source_sha256}
    folder = path.parent / BACKUP_DIR
    for b in sorted(folder.glob(f"{path.name}.*.bak"), reverse=True) if folder.is_dir() else []:
        text = b.read_bytes().decode("utf-8", errors="replace")
        if _sha(text) in expected:
            return text
    return None
