"""The stages, called in order. Read this first.

analyze: profile -> KernelTable -> roofline -> windows -> mapping -> sizing -> plan
apply:   plan -> rewrite (files)          report: plan x profiles -> Markdown + chart
verify:  plan x user factory -> switch off/on checks

Each function returns data; cli/ renders it. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .errors import InputError

ANALYZE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AnalyzeOptions:
    """Everything `analyze` takes (CONTRACTS.md flags), filled by cli/analyze.py."""

    profile: str | None = None
    rank: int | str | None = None          # a rank number, "all", or None (the lowest)
    run: str | None = None
    step: int | None = None
    steps: tuple[int, int] | None = None
    hardware: str | None = None
    hbm_bw_tbps: float | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    cmo_bw_gbps: float | None = None
    top: int = 10
    lookback: int | None = None
    model_src: str | None = None
    model_config: str | None = None
    src_map: tuple[tuple[str, str], ...] = ()
    tp: int = 1
    moe_tp: int = 1
    experts_per_rank: int | None = None
    targets: tuple[str, ...] = ()
    window: str | tuple[str, ...] | None = None   # one for all targets, or one per target
    dtype: str | None = None
    mode: str = "eager"
    max_sites: int | None = None
    max_size_cap: int | None = None
    out: str = "cannbot-prefetch"
    lang: str = "en"


@dataclass(frozen=True)
class AnalyzeResult:
    doc: dict[str, Any]                 # the --json document (CONTRACTS.md "analyze JSON")
    warnings: tuple[str, ...] = ()      # one-line warnings for stderr
    written: tuple[str, ...] = ()       # files written (plan, design)


def analyze(opts: AnalyzeOptions, progress=None) -> AnalyzeResult:
    """Profile -> roofline -> (with --model-src or --target) windows, mapping, sizing, plan.
    `progress(key, **params)`, when given, is told each stage (a catalog key)."""
    step = progress or (lambda key, **params: None)

    warnings: list[str] = []
    profile = cross = park = roof = None
    planning = bool(opts.model_src or opts.targets)
    if planning:
        check_out_dir(opts.out)   # before any work: a wrong --out is found in a second
    if opts.profile is None:
        if not opts.targets:
            raise InputError("a PROFILE path is required unless --target names the targets "
                             "(manual mode)")
    elif opts.rank == "all":
        from .ranks import read_all_ranks

        step("progress.load", path=opts.profile)
        # every rank in turn; with a plan to build, their tables wait on disk for the windows
        profile, roof, cross, park = read_all_ranks(
            opts.profile, lambda info: _hardware(opts, info, warnings), run=opts.run,
            step=opts.step, steps=opts.steps, keep_tables=planning)
    else:
        from .profiling.load import load_profile

        step("progress.load", path=opts.profile)
        # Only the counters the analysis reads: the parser skips the rest (half the time).
        profile = load_profile(opts.profile, rank=opts.rank, run=opts.run, step=opts.step,
                               steps=opts.steps, counters="analysis")
    try:
        return _analyze(opts, profile, roof, cross, warnings, step)
    finally:
        if park is not None:
            park.cleanup()


def _hardware(opts: AnalyzeOptions, info, warnings: list[str]):
    """The part (resolved from the flags and the profile), with the command-line overrides."""
    from . import hardware as hwmod

    hw = hwmod.resolve(opts.hardware, info)
    # `is not None`: an override of 0 is refused by with_overrides, never silently ignored
    if opts.hbm_bw_tbps is not None or opts.peak_tflops or opts.cmo_bw_gbps is not None:
        hw = hw.with_overrides(hbm_bw_tbps=opts.hbm_bw_tbps, peaks=opts.peak_tflops or None,
                               cmo_bw_gbps=opts.cmo_bw_gbps)
    if hwmod.is_assumed(hw) and f"hardware: {hw.detected_from}" not in warnings:
        warnings.append(f"hardware: {hw.detected_from}")
    return hw


def _analyze(opts: AnalyzeOptions, profile, roof, cross, warnings: list[str], step
             ) -> AnalyzeResult:
    info = profile.info if profile is not None else None
    hw = _hardware(opts, info, warnings)

    from .roofline.classify import select_top

    signatures: list[dict[str, Any]] = []
    top_sigs: list = []
    notes: list[str] = list(info.notes) if info else []
    if profile is not None:
        from .roofline.classify import classify

        step("progress.roofline")
        if roof is None:
            roof = classify(profile.table, hw)
        notes.extend(roof.notes)
        signatures = [_signature_json(s) for s in roof.signatures]
        top_sigs = select_top(roof, opts.top)
        if cross is not None:
            for s, js in zip(roof.signatures, signatures):
                js["per_rank"] = [r.to_json() for r in cross.spread(s)]
            notes.append(cross.note())

    candidates: list[dict[str, Any]] = []
    rejections: list[dict[str, Any]] = []
    written: list[str] = []
    if opts.model_src or opts.targets:
        if not opts.model_src:
            raise InputError("--target needs --model-src (the model source to plan against)")
        step("progress.plan")
        plan_files, candidates, rejections, plan_notes = _plan(roof, info, hw, opts, cross)
        notes.extend(plan_notes)
        written = _write_all(plan_files)
    elif roof is not None:
        from .roofline.verdict import split_targets
        from .settings import policy

        memory_bound, not_bound = split_targets(top_sigs, policy()["verdict"])
        rejections = [{"signature": _sig_label(s), "reason_code": code, "reason": why}
                      for s, code, why in not_bound]
        for s in memory_bound:
            candidates.append({"signature": _sig_label(s), "sig_id": s.sig_id,
                               "total_us": s.total_us, "mean_us": s.mean_us,
                               "verdict": s.verdict, "measured_verdict": s.measured_verdict})
        if candidates:
            notes.append("pass --model-src (and --model-config) to map these to source and "
                         "write a plan")

    doc = {
        "schema_version": ANALYZE_SCHEMA_VERSION,
        "tool_version": __version__,
        "profile": _profile_json(info),
        "hardware": hw.to_json(),
        "signatures": signatures,
        "top": [s.sig_id for s in top_sigs],
        "candidates": candidates,
        "rejections": rejections,
        "notes": notes,
        "outputs": written,
    }
    if cross is not None:
        doc["profile"]["path"] = opts.profile      # the job; `rank` is the one analysed in full
        doc["profile"]["ranks"] = [v.rank for v in cross.views]
        doc["ranks"] = cross.to_json()
    return AnalyzeResult(doc=doc, warnings=tuple(warnings), written=tuple(written))


def _sig_label(s) -> str:
    return f"{s.type} {s.input_shapes or '?'}"


_SIGNATURE_EXTRAS = ("sig_id", "family", "m", "n", "k", "batch", "weight_shape", "compute_dtype",
                     "mean_mac_ratio", "mean_mte2_ratio")


def _signature_json(s) -> dict[str, Any]:
    """CONTRACTS' signature keys (SignatureCost.to_json) plus the extras docs/contracts.md adds."""
    out = s.to_json()
    for extra in _SIGNATURE_EXTRAS:
        v = getattr(s, extra)
        out[extra] = list(v) if isinstance(v, tuple) else v
    return out


def _profile_json(info) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "path": info.path, "layout": info.layout, "level": info.level,
        "aic_metrics": info.aic_metrics, "rank": info.rank, "ranks": list(info.ranks),
        "run": info.run, "steps": list(info.steps),
        "warmup_excluded": list(info.warmup_excluded), "rows": info.rows,
        "rows_skipped": info.rows_skipped, "skipped_samples": list(info.skipped_samples),
        "files": list(info.files), "soc": info.soc, "cube_cores": info.cube_cores,
        "freq_mhz": info.freq_mhz,
    }


def _plan(roof, info, hw, opts: AnalyzeOptions, cross=None):
    """Windows -> mapping -> sizing -> Plan and design text; nothing written yet. With all
    ranks (`cross`), each rank's windows for the examined signatures are measured first."""
    from .plan.design import render_design
    from .plan import dump_plan
    from .plan.build import PlanOptions, build_plan

    if cross is not None and roof is not None and not opts.targets:
        from .ranks import measure_windows, signature_key
        from .roofline.classify import select_top

        keys = {signature_key(s) for s in select_top(roof, opts.top)}
        measure_windows(cross, keys, lookback=opts.lookback, min_window_us=None)

    out = Path(opts.out)
    popts = PlanOptions(
        lookback=opts.lookback, tp=opts.tp, moe_tp=opts.moe_tp,
        experts_per_rank=opts.experts_per_rank, targets=opts.targets, window=opts.window,
        dtype=opts.dtype, mode=opts.mode, max_sites=opts.max_sites,
        max_size_cap=opts.max_size_cap, src_map=tuple(f"{a}={b}" for a, b in opts.src_map),
        lang=opts.lang, top=opts.top, out_dir=str(out), cmo_bw_gbps=opts.cmo_bw_gbps,
        ranks=cross)
    plan, design, rejections = build_plan(roof, info, hw, resolve_model_src(opts.model_src),
                                          opts.model_config, popts)
    candidates = []
    for v in design.sites:
        site = v.site
        candidates.append({
            "site": site.id, "planned": v.planned,
            "target": f"{site.target.cls}.{site.target.attr}",
            "insert": f"{site.insert.cls}.{site.insert.method} {site.insert.position} "
                      f"{site.insert.anchor_call}",
            "dependency": site.dependency, "mapping": site.mapping, "max_size": site.max_size,
            "bound_by": site.basis.bound_by, "coefficient": site.basis.coefficient,
            "saving_us": ({"low": site.saving_us.low, "mid": site.saving_us.mid,
                           "high": site.saving_us.high} if site.saving_us is not None else None),
            "window": site.evidence.get("window"), "reason": v.reason or None})
    files = {out / "prefetch_plan.yaml": dump_plan(plan),
             out / "prefetch_design.md": render_design(design)}
    notes = list(design.notes)
    if not plan.sites:
        notes.append("no site planned: see the rejections (no safe window / not mapped / not "
                     "worth it); nothing to apply")
    return files, candidates, [r.to_dict() for r in rejections], notes


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
    is a file; or the folder cannot be written."""
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


def _write_all(files: dict[Path, str]) -> list[str]:
    """Write every output only once all of them exist in memory; each write is atomic."""
    from .plan import write_atomic

    for path, text in files.items():
        try:
            write_atomic(path, text)
        except OSError as exc:
            raise InputError(f"cannot write ({exc.strerror or exc})", path=str(path)) from None
    return [str(p) for p in files]


# ---------------------------------------------------------------- apply (rewrite/)

def apply_plan(plan_path, *, write: bool = False, revert: bool = False, helper=None, confirm=None,
               root=None):
    """Plan -> rewritten model files. Without `write` nothing is written (the result holds the
    diffs); with it, `confirm(changes) -> bool` is asked first (None: no question). `root`:
    the project root the plan's files must lie under (default: the git work tree holding the
    plan, else its folder)."""
    from .rewrite.files import commit, prepare, settle

    changes = prepare(plan_path, revert=revert, helper=helper, root=root)
    if write and changes.pending and (confirm is None or confirm(changes)):
        commit(changes)
    elif write and not changes.pending:
        changes.warnings.extend(settle(changes))
    return changes


def commit_changes(changes):
    """Write what `apply_plan` (without `write`) computed: backups first, all or nothing."""
    from .rewrite.files import commit

    return commit(changes)


def settle_changes(changes) -> list[str]:
    """Nothing to write: remove temp files a killed run left and set the plan's status to what
    the files are; returns what was done."""
    from .rewrite.files import settle

    return settle(changes)


# ---------------------------------------------------------------- verify (verify/)

BUILTIN_FACTORY = "built-in (tiny random model from config.json)"


def verify(plan_path, factory: str | None, *, out=None, progress=None, model_config=None):
    """Switch off/on run, graph-order and torch.compile checks of a model built by `factory`
    (MODULE:FUNC), or, without one, by the built-in factory from `model_config`
    (verify/factory.py)."""
    from .verify.runner import run_verify

    if progress is not None:
        progress("progress.verify_run", factory=factory or "built-in")
    if factory is None:
        from .verify.factory import build

        return run_verify(plan_path, BUILTIN_FACTORY,
                          built=lambda: build(plan_path, model_config), out=out)
    return run_verify(plan_path, factory, out=out)


# ---------------------------------------------------------------- report (report/)

def report(plan_path, baseline, *, optimized=None, verify_result=None, out="report.md",
           lang: str = "en", hardware: str | None = None, rank: int | None = None,
           steps: tuple[int, int] | None = None, progress=None):
    """Plan x baseline (x optimized) profile -> report.md, chart, next-step plan, A/B script.

    Returns (ReportData, written paths, json doc). Unreadable input raises InputError before
    anything is written; a mismatch (different models/hardware, sites not found) raises
    ReportMismatch after everything is written."""
    from .report.run import run_report

    if progress is not None:
        progress("progress.report")
    return run_report(plan_path, baseline, optimized=optimized, verify_result=verify_result,
                      out=out, lang=lang, hardware=hardware, rank=rank, steps=steps)
