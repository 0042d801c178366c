"""The stages, called in order. Read this first.

analyze: profile -> KernelTable -> roofline -> windows -> mapping -> sizing -> plan
apply:   plan -> rewrite (per-file outcomes)   report: plan x profiles -> ReportData
verify:  plan x model factory -> switch off/on checks

Each function returns data; nothing here prints, shapes JSON or writes a file. api/ runs the
stages only through these and wraps what they return in results that carry a status, with
writing as a separate step (docs/architecture.md "Arrows"); cli/ renders them.
The analysis' functions take the run's `Policy` (api/ builds it once, `Analysis.policy`);
report and verify build theirs where they start.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputError
from .policy import Policy


# ---------------------------------------------------------------- analyze

def read_profile(path, *, rank=None, run=None, step=None, steps=None, policy: Policy):
    """Stage 1: any supported export -> Profile (KernelTable + ProfileInfo)."""
    from .profiling.load import load_profile

    # Only the counters the analysis reads: the parser skips the rest (half the time).
    return load_profile(path, rank=rank, run=run, step=step, steps=steps, counters="analysis",
                        policy=policy)


def read_all_ranks(path, hardware_for, *, run=None, step=None, steps=None,
                   keep_tables: bool = False, policy: Policy):
    """Stages 1-2 on every rank (`--rank all`, ranks.py): each rank read and classified on its
    own -> (the reference rank's Profile and Roofline, the CrossRank, the folder of parked
    tables or None). `hardware_for(ProfileInfo)` gives the part a rank ran on."""
    from .ranks import read_all_ranks as read

    return read(path, hardware_for, run=run, step=step, steps=steps, keep_tables=keep_tables,
                policy=policy)


def resolve_hardware(name, info, *, hbm_bw_tbps=None, peak_tflops=None, cmo_bw_gbps=None,
                     policy: Policy):
    """The part (named, or detected from the profile, else assumed) with the user's overrides;
    returns (hardware, warnings)."""
    from . import hardware as hwmod

    hw = hwmod.resolve(name, info, policy=policy)
    # `is not None`: an override of 0 is refused by with_overrides, never silently ignored
    if hbm_bw_tbps is not None or peak_tflops or cmo_bw_gbps is not None:
        hw = hw.with_overrides(hbm_bw_tbps=hbm_bw_tbps, peaks=peak_tflops or None,
                               cmo_bw_gbps=cmo_bw_gbps)
    warnings = [f"hardware: {hw.detected_from}"] if hwmod.is_assumed(hw) else []
    return hw, warnings


def roofline(profile, hw, policy: Policy):
    """Stage 2: the roofline of every MatMul-family signature."""
    from .roofline.classify import classify

    return classify(profile.table, hw, policy=policy)


def top(roof, n: int):
    """The `n` memory-bound signatures with the most total time (none without a profile)."""
    if roof is None:
        return []
    from .roofline.classify import select_top

    return select_top(roof, n)


def shortlist(roof, n: int, policy: Policy):
    """Without model source: the top memory-bound signatures split by the deciding verdict ->
    (targets, [(signature, reason code, reason)])."""
    from .roofline.verdict import split_targets

    return split_targets(top(roof, n), policy["verdict"])


def measure_rank_windows(roof, cross, top: int, lookback: int | None, policy: Policy) -> None:
    """`--rank all`, before windows or a plan: each parked rank's windows for the examined
    signatures, so the plan takes the smallest across the ranks."""
    from .ranks import measure_windows, signature_key
    from .roofline.classify import select_top

    keys = {signature_key(s) for s in select_top(roof, top)}
    measure_windows(cross, keys, lookback=lookback, min_window_us=None, policy=policy)


def plan_options(*, src_map=(), **fields):
    """The options windows and build_plan take (plan.options.PlanOptions); `src_map`: (OLD,
    NEW) path-prefix pairs."""
    from .plan.options import PlanOptions, src_map_entries

    return PlanOptions(src_map=src_map_entries(src_map), **fields)


def windows(roof, popts, policy: Policy):
    """Stage 3 without model source, as build_plan takes it: (targets' rejections,
    WindowResult); with `popts.ranks` (--rank all) they hold on every rank."""
    from .plan.build import target_windows

    return target_windows(roof, popts, policy=policy)


def build_plan(roof, info, hw, model_src: str, model_config, popts, policy: Policy):
    """Stages 3-6: windows -> mapping -> sizing -> (Plan, DesignInputs, rejections)."""
    from .plan.build import build_plan as build

    return build(roof, info, hw, resolve_model_src(model_src), model_config, popts,
                 policy=policy)


def resolve_model_src(src: str) -> str:
    """A path, or an importable module name (e.g. `transformers.models.llama.modeling_llama`)
    resolved to its file without importing anything, so installed model code can be named
    directly (the analysis never imports the model)."""
    if Path(src).exists() or "/" in src or "\\" in src or src.endswith(".py"):
        return src
    found = module_file(src)
    if found is None:
        raise InputError(f"--model-src {src}: neither a file/folder nor an importable module")
    return found


def module_file(name: str) -> str | None:
    """The .py file of a dotted module name, or None. Only the top-level package is looked up
    (`find_spec` of a dotted name would import its parent packages: transformers' __init__ then
    runs, and prints "PyTorch was not found" where torch is absent); the rest of the name is
    walked as folders of that package."""
    import importlib.util

    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    try:
        top = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if top is None:
        return None
    if len(parts) == 1:
        return top.origin if top.origin and top.origin.endswith(".py") else None
    for base in list(top.submodule_search_locations or []):
        folder = Path(base).joinpath(*parts[1:-1])
        for cand in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
            if cand.is_file():
                return str(cand)
    return None


def check_out_dir(out: str) -> None:
    """InputError when `out` cannot be a folder: it, or the nearest existing folder above it,
    is a file; or the folder cannot be written. Nothing is created."""
    import os

    p = Path(out).expanduser()
    if not str(out).strip():
        raise InputError("--out is empty: name the output folder")
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == p else f"lies under {probe}, which is a file"
        raise InputError(f"--out {where}, not a folder (a missing folder is created)",
                         path=str(p))
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out: cannot write in {probe}", path=str(p))


# ---------------------------------------------------------------- apply (rewrite/)

def rewrite(plan_path, *, revert: bool = False, helper=None, root=None,
            allow_installed: bool = True, lang: str = "en"):
    """Plan -> the rewritten model files in memory (rewrite.changes.Changes: one outcome per
    file, with its diff); nothing written. `root`: the project root the plan's files must lie
    under (default: the git work tree holding the plan, else its folder). Without
    `allow_installed`, a changed file of an installed package is named in the warnings."""
    from .rewrite.files import prepare
    from .rewrite.installed import installed_previews

    changes = prepare(plan_path, revert=revert, helper=helper, root=root)
    if not allow_installed:
        changes.warnings.extend(installed_previews(changes, lang))
    return changes


def check_writable(changes, allow_installed: bool) -> None:
    """Before writing: InputError for a changed file of an installed package (unless
    allowed) or any file, the plan included, that cannot be written."""
    from .rewrite.installed import check_writable as check

    check(changes, allow_installed)


# ---------------------------------------------------------------- verify (verify/)

BUILTIN_FACTORY = "built-in (tiny random model from config.json)"


def verify(plan_path, factory: str | None, *, model_config=None, root=None):
    """Switch off/on run, graph-order and torch.compile checks of a model built by `factory`
    (MODULE:FUNC), or, without one, by the built-in factory from `model_config`
    (verify/factory.py) -> VerifyResult."""
    from .verify.runner import run_verify

    if factory is None:
        from .verify.factory import build

        return run_verify(plan_path, BUILTIN_FACTORY,
                          built=lambda: build(plan_path, model_config, root),
                          built_config_on=lambda: build(plan_path, model_config, root,
                                                        switch_on=True))
    return run_verify(plan_path, factory)


# ---------------------------------------------------------------- report (report/)

def report(plan_path, baseline=None, *, optimized=None, verify_result=None,
           hardware: str | None = None, rank: int | None = None,
           steps: tuple[int, int] | None = None):
    """Plan (x baseline x optimized profile) -> ReportData. Unreadable input raises InputError;
    a mismatch (different models/hardware, sites not found) is data: `banners`."""
    from .report.run import read_report

    return read_report(plan_path, baseline, optimized=optimized, verify_result=verify_result,
                       hardware=hardware, rank=rank, steps=steps)
