"""The write phase of `apply`: under a lock on every folder, check nothing changed since
prepare, back every file up under `.cannbot-prefetch/backup/`, write each atomically in a
kill-safe order (helper, config, models, plan; revert the other way) and put every file back if
a write fails; `settle` tidies what a killed run left."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from pathlib import Path

from ..atomic import TMP_MARK, new_file_mode, stale_temps, write_atomic
from ..errors import Conflict, InputError, SourceError
from ..plan import save_plan
from .changes import Changes, FileResult

STATE_DIR = Path(".cannbot-prefetch")
BACKUP_DIR = STATE_DIR / "backup"
LOCK_NAME = "lock"
LOCK_WAIT_S = 60.0


MAX_SOURCE_BYTES = 64 << 20   # the largest transformers modeling file is ~0.3 MB


def read_text(path: Path, what: str) -> str:
    """A model, config or helper file as text: a regular file (never a FIFO that would block)
    of at most MAX_SOURCE_BYTES, UTF-8; SourceError naming the file otherwise."""
    from ..inputfile import read_regular

    data = read_regular(path, what, MAX_SOURCE_BYTES, SourceError)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{what} is not UTF-8 text (byte {exc.start})", path=str(path)) from None


def state_dir(folder: Path, *sub: str, create: bool = True) -> Path | None:
    """`<folder>/.cannbot-prefetch[/sub...]`, each part a real folder (made when absent and
    `create`; else None when absent). A part that is a symlink or no folder is refused: the
    project may be someone else's clone, and a linked state folder would send the lock and the
    backups wherever it points (issue 33)."""
    d = Path(folder)
    for part in (STATE_DIR, *sub):
        d = d / part
        if create:
            try:
                os.mkdir(d)
            except FileExistsError:
                pass
            except OSError as exc:
                raise InputError(f"cannot create the state folder ({exc.strerror})",
                                 path=str(d)) from None
        try:
            mode = os.lstat(d).st_mode
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(mode):
            raise InputError("is a symlink or not a folder: cannbot-prefetch keeps its lock and "
                             "backups only in a real folder inside the project; remove it",
                             path=str(d))
    return d


def _open_lock(lock: Path) -> int:
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        why = "is a symlink" if os.path.islink(lock) else exc.strerror
        raise InputError(f"cannot open the lock file ({why}); remove it", path=str(lock)) from None


@contextlib.contextmanager
def locked(folders):
    """Hold `<folder>/.cannbot-prefetch/lock` for every folder (sorted: no deadlock between two
    runs), waiting up to LOCK_WAIT_S for another apply to finish; Conflict after that."""
    held = []
    try:
        for folder in sorted({Path(f) for f in folders}):
            lock = state_dir(folder) / LOCK_NAME
            fd = _open_lock(lock)
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
    """A new backup, never over an older one (the first original is kept however fast the
    runs come): `<name>.<stamp>.bak`, else `<name>.<stamp>-<n>.bak`."""
    folder = state_dir(path.parent, "backup")
    dest, n = folder / f"{path.name}.{stamp}.bak", 1
    while os.path.lexists(dest):
        dest, n = folder / f"{path.name}.{stamp}-{n:04d}.bak", n + 1
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
        backups = state_dir(p.parent, "backup", create=False)
        if backups is not None:
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
