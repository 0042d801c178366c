"""Is a file part of an installed package, or not writable? Asked before `apply --write`.

Following a quick start that names `transformers.models.llama.modeling_llama`, a plan points at
the installed transformers: writing there would change the model for every program of the
environment (and leave backups inside site-packages). `apply` refuses that unless asked
explicitly (`--allow-installed`), and says how to copy the file into the project instead.
"""

from __future__ import annotations

import os
import site
import sysconfig
from pathlib import Path

_INSTALL_DIRS = ("site-packages", "dist-packages")


def _install_roots() -> list[Path]:
    roots: set[str] = set()
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(p)
    try:
        roots.update(site.getsitepackages())
    except AttributeError:          # some virtualenv builds lack it
        pass
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        roots.add(user)
    return [Path(r).resolve() for r in roots]


def installed_location(path: str | os.PathLike) -> str | None:
    """Where `path` is installed (e.g. '.../site-packages'), or None for a project file."""
    p = Path(path).resolve()
    for part in p.parts:
        if part in _INSTALL_DIRS:
            idx = p.parts.index(part)
            return str(Path(*p.parts[: idx + 1]))
    for root in _install_roots():
        if p.is_relative_to(root):
            return str(root)
    return None


def unwritable(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be written (the file or its folder is read-only), or None."""
    p = Path(path)
    if p.exists():
        if not p.stat().st_mode & 0o222:   # no write bit: read-only, even to root (rename
            return f"{p} is read-only"     # would replace it whatever its mode)
        return None if os.access(p, os.W_OK) else f"{p} is not writable"
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is not writable"


def check_writable(changes, allow_installed: bool) -> None:
    """InputError (nothing written) for a changed file of an installed package, unless
    `allow_installed`, or for a changed file or the plan that cannot be written."""
    from ..errors import InputError
    from ..i18n import Msg

    for f in changes.files:
        if f.status != "changed":
            continue
        name = Path(f.path).name
        where = installed_location(f.path)
        if where is not None and not allow_installed:
            raise InputError(Msg("apply.installed", where=where, path=f.path, name=name),
                             path=f.path)
        why = unwritable(f.write_path)
        if why is not None:
            key = "apply.readonly" if f.kind == "model" else "apply.readonly_file"
            raise InputError(Msg(key, why=why, path=f.path, name=name), path=f.path)
    plan = changes.plan_path
    why = unwritable(plan)
    if why is not None and changes.plan.status != changes.status_after:
        raise InputError(Msg("apply.readonly_file", why=why, path=plan, name=Path(plan).name),
                         path=str(plan))


def installed_previews(changes, lang: str) -> list[str]:
    """A dry run names the changed files that lie in an installed package (writing refuses)."""
    from ..i18n import Msg

    out = []
    for f in changes.files:
        where = installed_location(f.path) if f.status == "changed" else None
        if where is not None:
            out.append(Msg("apply.installed_preview", where=where, path=f.path).render(lang))
    return out
