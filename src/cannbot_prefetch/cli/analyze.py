"""`cannbot prefetch analyze`: parse flags, call api.analyze, save the plan, render (Rich or --json)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from ..fmt import mib_number, number
from . import Command, DebugOpt, JsonOpt, LangOpt, guarded, parse_steps, make_console, prefetch


def _parse_steps(step: Optional[int], steps: Optional[str]) -> tuple[int, int] | None:
    from ..errors import InputError
    from ..i18n import Msg

    if steps is not None and step is not None:
        raise InputError(Msg("analyze.step_or_steps"))
    return parse_steps(steps)


def _parse_rank(text: Optional[str]) -> int | str | None:
    """`--rank N` or `--rank all`."""
    from ..errors import InputError
    from ..i18n import Msg

    if text is None or text.strip().lower() == "all":
        return None if text is None else "all"
    try:
        rank = int(text)
    except ValueError:
        raise InputError(Msg("analyze.rank_choice", value=text)) from None
    if rank < 0:
        raise InputError(Msg("analyze.rank_choice", value=text))
    return rank


def _parse_src_map(values: list[str]) -> tuple[tuple[str, str], ...]:
    from ..errors import InputError
    from ..i18n import Msg

    out = []
    for v in values:
        old, sep, new = v.partition("=")
        if not sep or not old:
            raise InputError(Msg("analyze.src_map_format", value=v))
        out.append((old, new))
    return tuple(out)


@prefetch.command("analyze", cls=Command)
def analyze(
    profile: Annotated[Optional[str], typer.Argument(
        help="Profiling export: *_ascend_pt folder (or a folder of ranks), msprof PROF_* folder "
             "or group, kernel_details.csv / op_summary_*.csv, ascend_pytorch_profiler_*.db, "
             "trace_view.json or a PyTorch profiler trace (.json/.json.gz). Optional with --target.",
        show_default=False)] = None,
    rank: Annotated[Optional[str], typer.Option(help="Rank to analyse when the folder holds several (default: lowest), or `all`: every rank, with targets and windows that hold on all of them.")] = None,
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
    tp: Annotated[int, typer.Option(help="Tensor-parallel size of the profiled deployment: weights are sized per rank (vLLM parallel linears, or a Hugging Face source split by role: q/k/v/gate/up/lm_head out dim / tp, o/down in dim / tp).")] = 1,
    moe_tp: Annotated[int, typer.Option("--moe-tp", help="MoE tensor-parallel size: fused expert weights split gate_up on 2I, down on I.")] = 1,
    experts_per_rank: Annotated[Optional[int], typer.Option("--experts-per-rank", help="Experts held per rank (MoE).")] = None,
    target: Annotated[list[str], typer.Option("--target", help="Manual mode: CLASS.ATTR to prefetch (repeatable).")] = [],
    window: Annotated[list[str], typer.Option(help="Manual mode: the dependency (a value or a module call; default: the output of the MatMul run last before the target, else after the layer's last one). Once for every --target, or once per --target in the same order.")] = [],
    dtype: Annotated[Optional[str], typer.Option(help="Weight dtype for sizes: bf16, fp16, int8, fp32 (default: the dtype the weight is declared with, else the config's).")] = None,
    mode: Annotated[str, typer.Option(help="Execution mode: eager, ge_graph, npugraph_ex.")] = "eager",
    call: Annotated[Optional[str], typer.Option("--call", help="Call form: direct (torch_npu.npu_prefetch on the current stream) or side_stream (a side stream joined later). Default: the mode's recommended one (eager, ge_graph: direct; npugraph_ex: side_stream).")] = None,
    max_sites: Annotated[Optional[int], typer.Option("--max-sites", help="Sites to plan (default 1: one target first).")] = None,
    max_size_cap: Annotated[Optional[int], typer.Option("--max-size-cap", help="User cap on max_size, bytes.")] = None,
    out: Annotated[str, typer.Option(help="Output folder for the plan and design document.")] = "cannbot-prefetch",
    switch: Annotated[str, typer.Option("--switch", help="Config key that turns the prefetches on, dotted: enable_prefetch (top of the model's config), additional_config.enable_prefetch (vllm-ascend's additional config), custom_params.enable_prefetch (a runner's YAML). CANNBOT_PREFETCH=1 in the environment works with any key.")] = "enable_prefetch",
    json_out: JsonOpt = False,
    lang: LangOpt = "en",
    debug: DebugOpt = False,
) -> None:
    """Find memory-bound MatMul-family operators (roofline + counters); with --model-src, plan prefetches."""
    def body():
        from ..api import Planned, analyze as run_analyze
        from ..errors import InputError
        from ..hardware import parse_peak_overrides
        from ..i18n import Msg
        from .progress import status

        if mode not in ("eager", "ge_graph", "npugraph_ex"):
            raise InputError(Msg("analyze.mode_choice", value=mode))
        if dtype is not None and dtype not in ("bf16", "fp16", "int8", "fp32"):
            raise InputError(Msg("analyze.dtype_choice", value=dtype))
        for name, val in (("--top", top), ("--tp", tp), ("--moe-tp", moe_tp),
                          ("--lookback", lookback), ("--max-sites", max_sites),
                          ("--max-size-cap", max_size_cap), ("--experts-per-rank", experts_per_rank)):
            if val is not None and val < 1:    # 0 is a value, never "not given"
                raise InputError(Msg("analyze.at_least_1", name=name))
        with status(lang) as tick:
            result = run_analyze(
                profile, rank=_parse_rank(rank), run=run, step=step,
                steps=_parse_steps(step, steps),
                hardware=hardware, hbm_bw_tbps=hbm_bw,
                peak_tflops=parse_peak_overrides(peak_tflops), cmo_bw_gbps=cmo_bw, top=top,
                lookback=lookback, model_src=model_src, model_config=model_config,
                src_map=_parse_src_map(src_map), tp=tp, moe_tp=moe_tp,
                experts_per_rank=experts_per_rank, targets=tuple(target),
                 window=window[0] if len(window) == 1 else tuple(window) or None,
                dtype=dtype, mode=mode, call=call, max_sites=max_sites, max_size_cap=max_size_cap,
                out=out, switch=switch,
                lang=lang, progress=tick)
        written = result.save() if isinstance(result, Planned) else []
        return result, result.to_json(written)

    result, doc = guarded(debug, body, json_out=json_out, lang=lang)
    from ..i18n import t

    for w in result.analysis.warnings:
        print(t("cli.warning", lang, text=w), file=sys.stderr)
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        render(doc, top, lang)
    if result.status:
        raise typer.Exit(result.status.exit_code)


def _evidence_line(con, sigs: list[dict], lang: str) -> None:
    """One line: how many signatures each (verdict, deciding evidence) pair holds
    (roofline/verdict.py gemm_verdict); nothing when no signature has counters."""
    from ..i18n import t

    counts: dict[tuple[str, str], int] = {}
    for s in sigs:
        if s.get("evidence"):
            key = (s.get("measured_verdict") or "-", s["evidence"])
            counts[key] = counts.get(key, 0) + 1
    if counts:
        items = t("joined.list", lang).join(t("analyze.evidence_item", lang, verdict=v, by=e, n=n)
                                            for (v, e), n in sorted(counts.items()))
        con.print(t("analyze.evidence", lang, items=items), style="dim")


def _found(signatures: list[dict]) -> str:
    """'MatMulV2 x8, BatchMatMul x2': the MatMul-family kernels found, by type."""
    counts: dict[str, int] = {}
    for s in signatures:
        counts[s["type"]] = counts.get(s["type"], 0) + int(s.get("count") or 0)
    items = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{k} ×{v}" for k, v in items[:6])
    return text + (f", … (+{len(items) - 6})" if len(items) > 6 else "")


def _hardware_said(hw: dict) -> str:
    """How the part was chosen; an assumption is said once, by the warning on stderr."""
    detected = str(hw.get("detected_from") or "")
    return "assumed, see the warning" if detected.startswith("assumed") else detected


def render(doc: dict, top: int, lang: str = "en") -> None:
    from rich.markup import escape
    from rich.table import Table

    from ..i18n import CATALOG, localize, t, texts

    # Piped output gets a width that fits the table instead of Rich's 80-column default.
    con = make_console()
    p, hw = doc.get("profile"), doc["hardware"]
    if p:
        steps = ",".join(map(str, p["steps"])) or t("analyze.steps_all", lang)
        warm = (t("analyze.warmup", lang, steps=",".join(map(str, p["warmup_excluded"])))
                if p["warmup_excluded"] else "")
        rank = t("analyze.rank", lang, rank=p["rank"]) if p.get("rank") is not None else ""
        skipped = t("analyze.rows_skipped", lang, n=p["rows_skipped"]) if p["rows_skipped"] else ""
        con.print(t("analyze.profile_line", lang, path=escape(str(p["path"])), layout=p["layout"],
                    level=p["level"] or t("analyze.level_unknown", lang),
                    counters=p["aic_metrics"] or t("analyze.counters_none", lang), rank=rank,
                    steps=steps, warm=warm, rows=f"{p['rows']:,}", skipped=skipped))
        for s in p.get("skipped_samples", [])[:3]:
            con.print(t("analyze.skipped_sample", lang, text=s), style="yellow")
    peaks = ", ".join(f"{k} {v:g}" for k, v in (hw.get("peaks") or {}).items())
    over = t("analyze.overrides", lang, text=hw["overrides"]) if hw.get("overrides") else ""
    con.print(t("analyze.hardware_line", lang, name=hw["name"], detected=_hardware_said(hw),
                peaks=peaks, hbm=hw.get("hbm_bw"), l2=mib_number(hw.get("l2_bytes")), overrides=over))
    by_id = {s.get("sig_id"): s for s in doc["signatures"]}
    sigs = [by_id[i] for i in doc.get("top", []) if i in by_id]
    footnotes: list[str] = []
    if not p:
        con.print(t("analyze.manual", lang), style="bold")
    elif not doc["signatures"]:
        con.print(t("analyze.no_matmul", lang), style="bold")
    elif not sigs and all(s.get("input_shapes") is None for s in doc["signatures"]):
        con.print(t("analyze.no_shapes", lang, n=sum(int(s.get("count") or 0) for s in doc["signatures"]),
                    types=_found(doc["signatures"])), style="bold")
    elif not sigs:
        con.print(t("analyze.none_memory_bound", lang, n=len(doc["signatures"]),
                    types=_found(doc["signatures"])), style="bold")
        _evidence_line(con, doc["signatures"], lang)
    else:
        col = texts("analyze.col", lang)
        table = Table(title=t("analyze.table_title", lang, n=len(sigs), total=len(doc["signatures"])))
        for key, just in (("num", "right"), ("type", "left"), ("shapes", "left"),
                          ("count", "right"), ("mean", "right"), ("share", "right"),
                          ("weight", "right"), ("ai", "right"), ("times", "right"),
                          ("verdicts", "left")):
            table.add_column(col[key], justify=just, overflow="fold")
        for i, s in enumerate(sigs[:top], 1):
            mark = ""
            if s.get("note"):
                footnotes.append(f"[{i}] {localize(s['note'], lang)}")
                mark = f" [{i}]"
            table.add_row(str(i), s["type"], f"{s.get('input_shapes') or '-'}\n{s.get('dtypes') or '-'}",
                          str(s["count"]), number(s["mean_us"]), f"{(s.get('share') or 0) * 100:.1f}%",
                          mib_number(s.get("weight_bytes")), f"{number(s.get('ai'))} / {number(s.get('ridge'), 0)}",
                          f"{number(s.get('t_memory_us'), 2)} / {number(s.get('t_compute_us'), 2)}",
                          f"{s.get('verdict') or '-'} / {s.get('measured_verdict') or '-'}{mark}")
        con.print(table)
        for f in footnotes:
            con.print(f, style="dim")
        _evidence_line(con, doc["signatures"], lang)
    # Planned sites, then every candidate not planned with its reason (listed sites appear in
    # the rejections too, so each shows once).
    for c in doc.get("candidates", []):
        if c.get("planned"):
            sv = c["saving_us"]
            gain = (t("analyze.gain", lang, low=f"{sv['low']:.1f}", high=f"{sv['high']:.1f}",
                      mid=f"{sv['mid']:.1f}") if sv else t("analyze.gain_unknown", lang))
            con.print(t("analyze.planned", lang, site=escape(c["site"]), target=escape(c["target"]),
                        insert=escape(c["insert"]), dependency=escape(c["dependency"]),
                        size=f"{c['max_size']:,}", bound_by=c["bound_by"], gain=gain))
    for r in doc.get("rejections", []):
        code = r.get("reason_code", "")
        reason = escape(str(localize(str(r.get("reason", "")), lang)))
        if lang != "en" and f"reason.{code}" in CATALOG:   # the code's gloss, then the reason
            reason = t("analyze.not_planned_zh_detail", lang, gloss=t(f"reason.{code}", lang),
                       reason=reason)
        con.print(t("analyze.not_planned", lang, signature=escape(str(r.get("signature", ""))),
                    reason=reason, code=code))
    for n in doc.get("notes", []):
        con.print(t("cli.note", lang, text=localize(n, lang)), style="dim", markup=False)
    for f in doc.get("outputs", []):
        con.print(t("cli.wrote", lang, path=f), style="green")
