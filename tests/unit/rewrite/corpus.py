"""The real corpus: transformers' own modeling files, copied to a temp dir at test time,
rewritten, and loaded under the package's module name so their relative imports resolve."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import shutil
import sys
from pathlib import Path

import transformers

from cannbot_prefetch.rewrite.engine import rewrite_source
from cannbot_prefetch.rewrite.helper import helper_source

MODELS = Path(transformers.__file__).parent / "models"


def copy_model(family: str, tmp: Path) -> Path:
    src = MODELS / family / f"modeling_{family}.py"
    dest = tmp / src.name
    shutil.copyfile(src, dest)
    return dest


@contextlib.contextmanager
def loaded(family: str, path: Path, helper_path: Path | None = None):
    """Exec `path` as transformers.models.<family>.modeling_<family> (temporarily)."""
    pkg = f"transformers.models.{family}"
    name = f"{pkg}.modeling_{family}"
    importlib.import_module(pkg)
    saved = {k: sys.modules.get(k) for k in (name, f"{pkg}._cannbot_prefetch")}
    try:
        if helper_path is not None:
            hs = importlib.util.spec_from_file_location(f"{pkg}._cannbot_prefetch", helper_path)
            helper = importlib.util.module_from_spec(hs)
            hs.loader.exec_module(helper)
            sys.modules[f"{pkg}._cannbot_prefetch"] = helper
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        yield module
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def rewrite_family(family: str, tmp: Path, plan) -> tuple[Path, Path, object]:
    """Copy, rewrite with `plan`'s sites, write the helper next to it."""
    path = copy_model(family, tmp)
    original = path.read_text()
    out = rewrite_source(original, plan.sites, mode=plan.mode, switch=plan.switch)
    path.write_text(out.code)
    helper = tmp / "_cannbot_prefetch.py"
    helper.write_text(helper_source(plan.mode, plan.switch.config_path))
    return path, helper, out
