"""File IO around `rewrite_source`: plan -> per-file results, then (optionally) an atomic write.

`prepare(plan_path, ...)` (here) reads and rewrites in memory and returns `Changes` (changes.py;
nothing written); write.py's `commit(changes)` locks the file set, checks nothing changed since `prepare`, backs every file up
under `.cannbot-prefetch/backup/`, writes each through a temp file + rename (mode kept), and puts
every file back if any write fails half-way. root.py says where files may be, config_switch.py
adds the switch to a YAML runner config.

Safety rules (issue 11; CONTRACTS "Plan fields are data"):
- every target and config file lies under the project root: `--root`, else the git work tree
  holding the current folder, else the current folder (checked on the path as written and on the file a
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

import hashlib
import os
import subprocess
from pathlib import Path

import libcst as cst

from ..atomic import stale_temps
from ..errors import Conflict, InputError, SourceError
from ..plan import grammar, load_plan
from .changes import Changes, FileResult
from .config_switch import add_yaml_key
from .engine import SiteErrors, UnsafeOutput, rewrite_source
from .helper import HELPER_NAME, helper_source, is_ours
from .markers import (IMPORT_TAG, JOIN_TAG, LINK_TAG, MARKER, SWITCH_TAG, has_markers, marked_ids,
                      strip_ids, strip_markers, strip_yaml_markers)
from .root import project_root, under_root
from .write import read_text, state_dir

SHARED_TAGS = {IMPORT_TAG, SWITCH_TAG, JOIN_TAG, LINK_TAG}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


# A project folder may be someone else's clone: its git config can name commands (core.fsmonitor,
# hooks, clean filters) that a plain `git status` runs. These switch off the first two and keep
# status from writing the index (no post-index-change hook) or entering submodules; a repository
# whose config defines a filter is not asked at all (a filter cannot be switched off).
_GIT = ("git", "--no-optional-locks", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
        "-c", "core.untrackedCache=false")


def _git_dirty(path: Path) -> bool:
    """Whether git reports uncommitted changes to `path`, asked without running anything the
    repository configures (see _GIT); False when git is absent or that cannot be promised."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*_GIT, *args], cwd=path.parent, capture_output=True, text=True,
                              timeout=10, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    try:
        conf = git("config", "--list", "--name-only")
        if conf.returncode != 0 or any(k.startswith("filter.") for k in conf.stdout.split()):
            return False
        out = git("status", "--porcelain", "--ignore-submodules=all", "--", path.name)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


# ---------------------------------------------------------------- prepare

def _foreign(text: str, ids: set[str]) -> set[str]:
    """Site ids of marked lines in `text` that this plan does not have (another plan's)."""
    return marked_ids(text) - ids - SHARED_TAGS


def _other_users(helper_path: Path, mine: set[Path]) -> list[Path]:
    """Other model files in the helper's folder that import it (another plan's)."""
    out = []
    for f in sorted(helper_path.parent.glob("*.py")):
        if f == helper_path or f.absolute() in mine or f.resolve() in mine or not f.is_file():
            continue        # (a FIFO named *.py would block the read)
        try:
            if f.stat().st_size > (8 << 20):
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "_cannbot_prefetch" in text and f"{MARKER}{IMPORT_TAG}" in text and has_markers(text):
            out.append(f)
    return out




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
        lex, real = under_root(plan_path, s.target.file, top, f"site {s.id}: target.file")
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
        raw = read_text(path, "model source")
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
            out = rewrite_source(raw, sites, mode=plan.mode, switch=plan.switch, helper_module=module,
                                 call=plan.call)
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
        _helper_name_free(helper_path)
        old = read_text(helper_path, "helper") if helper_path.is_file() else None
        if old is not None and not is_ours(old):
            raise InputError("exists and was not written by cannbot-prefetch: choose another "
                             "--helper path", path=str(helper_path))
        users = _other_users(helper_path, set(by_file) | set(imported.values())) if old else []
        users_named = [u.name for u in users] + still_used
        if revert:
            new = old if users_named else None
        elif any_applied:
            new = helper_source(plan.mode, plan.switch.config_path, plan.switch.default,
                                plan.call)
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
        lex, cfg = under_root(plan_path, plan.switch.config_file, top, "switch.config_file")
        _config_file_allowed(lex, cfg, top, set(by_file) | {plan_path.resolve()}
                             | ({helper_path.resolve()} if helper_path else set()))
        if not cfg.is_file():
            raise InputError("switch.config_file not found", path=str(lex))
        old = read_text(cfg, "switch.config_file")
        new = strip_yaml_markers(old) if revert else (add_yaml_key(old, plan.switch.config_path)
                                                      if any_applied else old)
        results.append(FileResult(str(lex), "changed" if new != old else "unchanged",
                                  kind="config", old=old, new=new,
                                  real=str(cfg) if cfg != lex else "",
                                  stale=[str(t) for t in stale_temps(cfg)]))
    status_after = "applied" if (not revert and any_applied) else "proposed"
    return Changes(plan_path, plan, revert, results, warnings, root=str(top),
                   status_after=status_after)


_VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", ".cannbot-prefetch"})
_CONFIG_SUFFIXES = (".yaml", ".yml")     # the one config format config_switch.py writes


def _config_file_allowed(lex: Path, real: Path, top: Path, others: set[Path]) -> None:
    """switch.config_file names a YAML runner config: never VCS metadata or the tool's state
    (git breaks, or the lock and backups land there), never a file the plan also rewrites or
    the plan itself (one edit would silently undo the other)."""
    where = "switch.config_file"
    for p in (lex, real):
        inside = p.relative_to(top) if p.is_relative_to(top) else p
        if _VCS_DIRS & set(inside.parts[:-1]):
            raise InputError(f"{where} lies in version-control metadata or the tool's state "
                             "folder: name the runner's YAML config", path=str(lex))
        if p.suffix.lower() not in _CONFIG_SUFFIXES:
            raise InputError(f"{where} must be a YAML runner config (.yaml or .yml): the switch "
                             "is written as a YAML key", path=str(lex))
    if real in others:
        raise InputError(f"{where} is a file the plan also writes (a model file, the helper or "
                         "the plan itself): name the runner's YAML config", path=str(lex))


def _helper_name_free(helper_path: Path) -> None:
    """The helper is imported by its module name: a folder (a package, or anything not a
    regular file) of that name beside it would shadow it or break the write."""
    pkg = helper_path.with_suffix("")
    if pkg.is_dir() or (os.path.lexists(helper_path) and not helper_path.is_file()):
        raise InputError(f"a folder or package named {pkg.name} is in the way of the helper "
                         f"module (`import {pkg.name}` would find it, or the helper cannot be "
                         "written there): rename it or choose --helper", path=str(helper_path))


def _matching_backup(path: Path, sites) -> str | None:
    """The newest backup of `path` that is the planned file (for --revert when markers are gone)."""
    expected = {s.source_sha256 for s in sites if s.source_sha256}
    folder = state_dir(path.parent, "backup", create=False)
    for b in sorted(folder.glob(f"{path.name}.*.bak"), reverse=True) if folder else []:
        text = b.read_bytes().decode("utf-8", errors="replace")
        if _sha(text) in expected:
            return text
    return None
