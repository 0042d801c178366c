"""The write phase of `apply`: under a lock on every folder, check nothing changed since
prepare, back every file up under `.cannbot-prefetch/backup/`, write each atomically in a
kill-safe order (helper, config, models, plan; revert the other way) and put every file back if
a write fails; `settle` tidies what a killed run left."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from ..atomic import TMP_MARK, new_file_mode, stale_temps, write_atomic
from ..errors import Conflict, SourceError
from ..plan import save_plan
from .changes import Changes, FileResult

STATE_DIR = Path(".cannbot-prefetch")
BACKUP_DIR = STATE_DIR / "backup"
LOCK_NAME = "lock"
LOCK_WAIT_S = 60.0


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{what} is not UTF-8 text (byte {exc.start})", path=str(path)) from None
    except OSError as exc:
        raise SourceError(f"{what} cannot be read ({exc.strerror})", path=str(path)) from None


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
            now = read_text(p, f.kind) if p.is_file() else None
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
