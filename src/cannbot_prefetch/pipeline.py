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
    rank: int | None = None
    run: str | None = None
    step: int | None = None
    steps: tuple[int, int] | None = None
    hardware: str | None = None
    hbm_bw_tbps: float | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    cmo_bw_gbps: float | None = None
    top: int = 10
    lookback: int | None = None
    model_src: tuple[str, ...] = ()
    model_config: str | None = None
    src_map: tuple[tuple[str, str], ...] = ()
    tp: int = 1
    moe_tp: int = 1
    experts_per_rank: int | None = None
    targets: tuple[str, ...] = ()
    window: str | None = None
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


def analyze(opts: AnalyzeOptions) -> AnalyzeResult:
    """Profile -> roofline -> (with --model-src or --target) windows, mapping, sizing, plan."""
    from . import hardware as hwmod

    warnings: list[str] = []
    profile = None
    if opts.profile is None:
        if not opts.targets:
            raise InputError("a PROFILE path is required unless --target names the targets "
                             "(manual mode)")
    else:
        from .profiling.load import load_profile

        profile = load_profile(opts.profile, rank=opts.rank, run=opts.run, step=opts.step,
                               steps=opts.steps)

    info = profile.info if profile is not None else None
    hw = hwmod.resolve(opts.hardware, info)
    if opts.hbm_bw_tbps or opts.peak_tflops or opts.cmo_bw_gbps:
        hw = hw.with_overrides(hbm_bw_tbps=opts.hbm_bw_tbps, peaks=opts.peak_tflops or None,
                               cmo_bw_gbps=opts.cmo_bw_gbps)
    if "assum" in (hw.detected_from or "").lower():
        warnings.append(f"hardware: {hw.detected_from}")

    roof = None
    signatures: list[dict[str, Any]] = []
    top: list[int] = []
    notes: list[str] = list(info.notes) if info else []
    if profile is not None:
        from .roofline.classify import classify

        roof = classify(profile.table, hw)
        notes.extend(roof.notes)
        signatures = [_signature_json(s) for s in roof.signatures]
        from .roofline.classify import select_top

        top = [s.sig_id for s in select_top(roof, opts.top)]

    candidates: list[dict[str, Any]] = []
    rejections: list[dict[str, Any]] = []
    written: list[str] = []
    if opts.model_src or opts.targets:
        from .planning import plan_and_write

        outcome = plan_and_write(roof, profile, hw, opts)
        candidates = list(outcome.candidates)
        rejections = list(outcome.rejections)
        written = [str(p) for p in outcome.written]
        notes.extend(outcome.notes)
        warnings.extend(outcome.warnings)
    elif roof is not None:
        for s in select_top(roof, opts.top):
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
        "top": top,
        "candidates": candidates,
        "rejections": rejections,
        "notes": notes,
        "outputs": written,
    }
    return AnalyzeResult(doc=doc, warnings=tuple(warnings), written=tuple(written))


def _sig_label(s) -> str:
    return f"{s.type} {s.input_shapes or '?'}"


def _signature_json(s) -> dict[str, Any]:
    keys = ("type", "input_shapes", "dtypes", "formats", "count", "total_us", "mean_us", "share",
            "flops", "bytes", "weight_bytes", "ai", "ridge", "t_compute_us", "t_memory_us",
            "verdict", "measured_verdict", "note")
    out = {k: getattr(s, k, None) for k in keys}
    for extra in ("sig_id", "family", "m", "n", "k", "batch", "weight_shape", "compute_dtype",
                  "mean_mac_ratio", "mean_mte2_ratio"):
        if hasattr(s, extra):
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


def output_dir(opts: AnalyzeOptions) -> Path:
    return Path(opts.out)


# ---------------------------------------------------------------- apply (rewrite/)

def apply_plan(plan_path, *, write: bool = False, revert: bool = False, helper=None, confirm=None):
    """Plan -> rewritten model files. Without `write` nothing is written (the result holds the
    diffs); with it, `confirm(changes) -> bool` is asked first (None: no question)."""
    from .rewrite.files import commit, prepare

    changes = prepare(plan_path, revert=revert, helper=helper)
    if write and changes.pending and (confirm is None or confirm(changes)):
        commit(changes)
    return changes


# ---------------------------------------------------------------- verify (verify/)

def verify(plan_path, factory: str, *, out=None):
    """Switch off/on run and graph-order check of a model built by `factory` (MODULE:FUNC)."""
    from .verify.runner import run_verify

    return run_verify(plan_path, factory, out=out)


# ---------------------------------------------------------------- report (report/)

def report(plan_path, baseline, *, optimized=None, verify_result=None, out="report.md",
           lang: str = "en", hardware: str | None = None, rank: int | None = None,
           steps: tuple[int, int] | None = None):
    """Plan x baseline (x optimized) profile -> report.md, chart, next-step plan, A/B script.

    Returns (ReportData, written paths, json doc). Unreadable input raises InputError before
    anything is written; a mismatch (different models/hardware, sites not found) raises
    ReportMismatch after everything is written."""
    from .report.run import run_report

    return run_report(plan_path, baseline, optimized=optimized, verify_result=verify_result,
                      out=out, lang=lang, hardware=hardware, rank=rank, steps=steps)
