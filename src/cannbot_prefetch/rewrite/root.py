"""Where files may be: the project root (`--root`, else the git work tree holding the plan,
else the plan's folder) and the rule that every file a plan touches lies under it, checked on
the path as written and on the file a symlink leads to."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


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


def under_root(plan_path: Path, file: str, root: Path, what: str) -> tuple[Path, Path]:
    """(the path as imported, the file it leads to); InputError when either is outside root."""
    lex = _lexical(plan_path, file)
    real = lex.resolve()
    root_lex = Path(os.path.normpath(root.absolute()))
    if not (_inside(real, root) and (_inside(lex, root_lex) or _inside(lex, root))):
        raise InputError(f"{what} {file!r} lies outside the project root {root} (the plan's "
                         f"folder, or the git work tree holding it): a plan may only touch files "
                         f"under it; pass --root to name the project", path=str(plan_path))
    return lex, real
