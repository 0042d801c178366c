"""Where files may be: the project root (`--root`, else the git work tree holding the current
folder, else the current folder) and the rule that every file a plan touches lies under it,
checked on the path as written and on the file a symlink leads to. The default never comes
from the plan (its folder or anything it names): `--out out/x` puts a plan beside the model,
not above it, and a plan must not widen what it may touch."""

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
    """`--root`, else the git work tree holding the current folder, else the current folder
    (`plan_path` only names the plan in messages)."""
    if root is not None:
        r = Path(root)
        if not r.is_dir():
            raise InputError("--root is not a folder", path=str(r))
        return r.resolve()
    here = Path.cwd().resolve()
    return _git_top(here) or here


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
        raise InputError(f"{what} {file!r} lies outside the project root {root} (the git work "
                         f"tree holding the current folder, else the current folder): a plan may "
                         f"only touch files under it; run apply from the project, or pass --root "
                         f"to name it", path=str(plan_path))
    return lex, real
