"""`cannbot prefetch analyze`: parse flags, call pipeline.analyze, render (Rich or --json)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import InputError
from ..hardware import parse_peak_overrides
from . import DebugOpt, JsonOpt, LangOpt, check_lang, guarded, parse_steps, make_console, prefetch


def _parse_steps(step: Optional[int], steps: Optional[str]) -> tuple[int, int] | None:
    if steps is not None and step is not None:
        raise InputError("use --step or --steps, not both")
    return parse_steps(steps)



def _parse_src_map(values: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values:
        old, sep, new = v.partition("=")
        if not sep or not old:
            raise InputError(f"--src-map takes OLD=NEW path prefixes, not {v!r}")
        out.append((old, new))
    return tuple(out)


@prefetch.command("analyze")
def analyze(
    profile: Annotated[Optional[str], typer.Argument(
        help="Profiling export: *_ascend_pt folder (or a folder of ranks), msprof PROF_* folder "
             "or group, kernel_details.csv / op_summary_*.csv, ascend_pytorch_profiler_*.db, "
             "trace_view.json or a PyTorch profiler trace (.json/.json.gz). Optional with --target.",
        show_default=False)] = None,
    rank: Annotated[Optional[int], typer.Option(help="Rank to analyse when the folder holds several (default: lowest).")] = None,
    run: Annotated[Optional[str], typer.Option(help="msprof group: the counter-group run (default PipeUtilization).")] = None,
    step: Annotated[Optional[int], typer.Option(help="Analyse this step only.")] = None,
    steps: Annotated[Optional[str], typer.Option(help="Analyse steps A:B (inclusive). Default: all but the first (warm-up).")] = None,
    hardware: Annotated[Optional[str], typer.Option(help="Part (910B1..910B4, Ascend910_9382, 310P3, H100, H200, A100, cpu; see `hardware list`) or a hardware YAML file.")] = None,
    hbm_bw: Annotated[Optional[float], typer.Option("--hbm-bw", help="Override HBM bandwidth, TB/s.")] = None,
    peak_tflops: Annotated[list[str], typer.Option("--peak-tflops", help="Override a peak: DTYPE=TFLOPS (repeatable).")] = [],
    cmo_bw: Annotated[Optional[float], typer.Option("--cmo-bw", help="Override the CMO (prefetch) rate, GB/s.")] = None,
    top: Annotated[int, typer.Option(help="How many memory-bound signatures to list.")] = 10,
    lookback: Annotated[Optional[int], typer.Option(help="Predecessor ops examined for a window (default 3).")] = None,
    model_src: Annotated[Optional[str], typer.Option("--model-src", help="Model source file or folder. Enables the plan.")] = None,
    model_config: Annotated[Optional[str], typer.Option("--model-config", help="The model's config.json.")] = None,
    src_map: Annotated[list[str], typer.Option("--src-map", help="Map a profiled path prefix to a local one: OLD=NEW.")] = [],
    tp: Annotated[int, typer.Option(help="Tensor-parallel size (weight shards).")] = 1,
    moe_tp: Annotated[int, typer.Option("--moe-tp", help="MoE tensor-parallel size.")] = 1,
    experts_per_rank: Annotated[Optional[int], typer.Option("--experts-per-rank", help="Experts held per rank (MoE).")] = None,
    target: Annotated[list[str], typer.Option("--target", help="Manual mode: CLASS.ATTR to prefetch (repeatable).")] = [],
    window: Annotated[Optional[str], typer.Option(help="Manual mode: the dependency expression (default: nearest legal one).")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Weight dtype for sizes: bf16, fp16, int8 (default: the config's).")] = None,
    mode: Annotated[str, typer.Option(help="Execution mode: eager, ge_graph, npugraph_ex.")] = "eager",
    max_sites: Annotated[Optional[int], typer.Option("--max-sites", help="Sites to plan (default 1: one target first).")] = None,
    max_size_cap: Annotated[Optional[int], typer.Option("--max-size-cap", help="User cap on max_size, bytes.")] = None,
    out: Annotated[str, typer.Option(help="Output folder for the plan and design document.")] = "cannbot-prefetch",
    json_out: JsonOpt = False,
    lang: LangOpt = "en",
    debug: DebugOpt = False,
) -> None:
    """Find memory-bound MatMul-family operators (roofline + counters); with --model-src, plan prefetches."""
    from ..pipeline import AnalyzeOptions, analyze as run_analyze

    def body():
        check_lang(lang)
        if mode not in ("eager", "ge_graph", "npugraph_ex"):
            raise InputError(f"--mode must be eager, ge_graph or npugraph_ex, not {mode!r}")
        if dtype is not None and dtype not in ("bf16", "fp16", "int8"):
            raise InputError(f"--dtype must be bf16, fp16 or int8, not {dtype!r}")
        for name, val in (("--top", top), ("--tp", tp), ("--moe-tp", moe_tp)):
            if val < 1:
                raise InputError(f"{name} must be at least 1")
        opts = AnalyzeOptions(
            profile=profile, rank=rank, run=run, step=step, steps=_parse_steps(step, steps),
            hardware=hardware, hbm_bw_tbps=hbm_bw, peak_tflops=parse_peak_overrides(peak_tflops),
            cmo_bw_gbps=cmo_bw, top=top, lookback=lookback, model_src=model_src,
            model_config=model_config, src_map=_parse_src_map(src_map), tp=tp, moe_tp=moe_tp,
            experts_per_rank=experts_per_rank, targets=tuple(target), window=window, dtype=dtype,
            mode=mode, max_sites=max_sites, max_size_cap=max_size_cap, out=out, lang=lang)
        return run_analyze(opts)

    result = guarded(debug, body)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if json_out:
        sys.stdout.write(json.dumps(result.doc, indent=2, ensure_ascii=False, default=str) + "\n")
        return
    render(result.doc, top)


def _fmt(v, digits=1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def _mb(v) -> str:
    return "-" if v is None else f"{v / 1e6:,.1f}"


def render(doc: dict, top: int) -> None:
    # Piped output gets a width that fits the table instead of Rich's 80-column default.
    con = make_console()
    p, hw = doc.get("profile"), doc["hardware"]
    if p:
        steps = ",".join(map(str, p["steps"])) or "all"
        warm = f" (warm-up step {','.join(map(str, p['warmup_excluded']))} excluded)" if p["warmup_excluded"] else ""
        rank = f", rank {p['rank']}" if p.get("rank") is not None else ""
        con.print(f"[bold]Profile[/] {p['path']} — {p['layout']}, {p['level'] or 'level unknown'}, "
                  f"counters: {p['aic_metrics'] or 'none'}{rank}, steps {steps}{warm}, "
                  f"{p['rows']:,} rows" + (f", {p['rows_skipped']} skipped" if p["rows_skipped"] else ""))
        for s in p.get("skipped_samples", [])[:3]:
            con.print(f"  skipped: {s}", style="yellow")
    peaks = ", ".join(f"{k} {v:g}" for k, v in (hw.get("peaks") or {}).items())
    con.print(f"[bold]Hardware[/] {hw['name']} ({hw.get('detected_from', '')}): peaks TFLOPS {peaks}; "
              f"HBM {hw.get('hbm_bw')} TB/s; L2 {_mb(hw.get('l2_bytes'))} MB"
              + (f"; overrides {hw['overrides']}" if hw.get("overrides") else ""))
    by_id = {s.get("sig_id"): s for s in doc["signatures"]}
    sigs = [by_id[i] for i in doc.get("top", []) if i in by_id]
    footnotes: list[str] = []
    if not p:
        con.print("No profile (manual mode): no roofline; what needs a profile is unknown.",
                  style="bold")
    elif not doc["signatures"]:
        con.print("No MatMul-family operator with shapes in this profile.", style="bold")
    elif not sigs:
        con.print("No memory-bound MatMul-family operator (by roofline or counters): nothing to "
                  "prefetch here.", style="bold")
    else:
        t = Table(title=f"Top {len(sigs)} memory-bound MatMul-family signatures by time, "
                        f"by roofline or counters (of {len(doc['signatures'])} signatures)")
        for col, just in (("#", "right"), ("type", "left"), ("input shapes / dtypes", "left"),
                          ("n", "right"), ("mean µs", "right"), ("share", "right"),
                          ("weight MB", "right"), ("AI / ridge", "right"),
                          ("t_mem / t_comp µs", "right"), ("analytic / measured", "left")):
            t.add_column(col, justify=just, overflow="fold")
        for i, s in enumerate(sigs[:top], 1):
            mark = ""
            if s.get("note"):
                footnotes.append(f"[{i}] {s['note']}")
                mark = f" [{i}]"
            t.add_row(str(i), s["type"], f"{s.get('input_shapes') or '-'}\n{s.get('dtypes') or '-'}",
                      str(s["count"]), _fmt(s["mean_us"]), f"{(s.get('share') or 0) * 100:.1f}%",
                      _mb(s.get("weight_bytes")), f"{_fmt(s.get('ai'))} / {_fmt(s.get('ridge'), 0)}",
                      f"{_fmt(s.get('t_memory_us'), 2)} / {_fmt(s.get('t_compute_us'), 2)}",
                      f"{s.get('verdict') or '-'} / {s.get('measured_verdict') or '-'}{mark}")
        con.print(t)
        for f in footnotes:
            con.print(f, style="dim")
    # Planned sites, then every candidate not planned with its reason (listed sites appear in
    # the rejections too, so each shows once).
    for c in doc.get("candidates", []):
        if c.get("planned"):
            sv = c["saving_us"]
            gain = (f"{sv['low']:.1f}-{sv['high']:.1f} µs/step (mid {sv['mid']:.1f})" if sv
                    else "unknown (no profile)")
            con.print(f"[green]planned[/] {c['site']}: prefetch {c['target']} in {c['insert']} "
                      f"(dependency {c['dependency']}), max_size {c['max_size']:,} B (bound by "
                      f"{c['bound_by']}), expected saving {gain}")
    for r in doc.get("rejections", []):
        con.print(f"[yellow]not planned[/] {r.get('signature', '')}: {r.get('reason', '')} "
                  f"[dim]({r.get('reason_code', '')})[/]")
    for n in doc.get("notes", []):
        con.print(f"note: {n}", style="dim")
    for f in doc.get("outputs", []):
        con.print(f"wrote {f}", style="green")
