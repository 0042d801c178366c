"""The atomic write every output uses, and its leftovers: a temp file beside the target, renamed
over it, so a reader never sees half a file; modes kept; temp files of a killed run found by
their name."""

from __future__ import annotations

import os
from pathlib import Path


TMP_MARK = ".cbp-tmp-"


def temp_prefix(path: Path) -> str:
    """Temp files of `path` are `.<name>.cbp-tmp-XXXX`: a later run can tell them (and only
    them) apart as leftovers of a killed write (`stale_temps`)."""
    return f".{path.name}{TMP_MARK}"


def stale_temps(path: Path) -> list[Path]:
    folder = path.parent
    if not folder.is_dir():
        return []
    return sorted(folder.glob(temp_prefix(path) + "*"))


def new_file_mode() -> int:
    """The mode `open()` would give a new file (0666 less the umask)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _temp(p: Path, data: str | bytes, mode: int | None) -> str:
    """`data` in a new temp file beside `p` (mode set before any rename); OSError naming `p`."""
    import tempfile

    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            try:
                mode = p.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = new_file_mode()
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(p), dir=p.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(p)) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as exc:   # disk full, a file-size limit: the error names the file written
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(p)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _replace(tmp: str, p: Path) -> None:
    try:
        os.replace(tmp, p)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(p)) from None


def write_atomic(path: str | os.PathLike, data: str | bytes, mode: int | None = None) -> None:
    """Write via a temp file in the same folder + rename, so readers never see half a file.

    The file keeps its mode (a new one gets the umask's), set on the temp file before the
    rename: there is no moment where the file exists with mkstemp's 0600. An OSError names
    the file (disk full, a size limit, no permission)."""
    p = Path(path)
    _replace(_temp(p, data, mode), p)


def write_set(files: dict) -> list[str]:
    """Write an output set ({path: data}) as one unit, as far as renames allow: leftovers of a
    killed run removed, every file written to its temp first, then all renamed in a row (a kill
    while writing leaves the old set whole; only the renames, microseconds, can split it)."""
    paths = [Path(p) for p in files]
    for p in paths:
        for t in stale_temps(p):
            t.unlink(missing_ok=True)
    temps: list[str] = []
    try:
        for p, data in zip(paths, files.values()):
            temps.append(_temp(p, data, None))
        for tmp, p in zip(temps, paths):
            _replace(tmp, p)
    except BaseException:
        for tmp in temps:
            Path(tmp).unlink(missing_ok=True)
        raise
    return [str(p) for p in paths]
