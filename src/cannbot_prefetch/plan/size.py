"""How one mapped site is sized: bytes per weight element, the weight's dims and role, the
placed window's usable time and traffic, and the MoE experts hit (sizing.py does the math)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import InputError
from ..gain import GainInputs
from ..i18n import said
from ..mapping import Mapped
from ..roofline.shapes import dtype_bytes
from ..sizing import Sized, Weight, WindowTime, size_site
from ..windows import Candidate, TargetSig
from .options import PlanOptions


def element_bytes(opts: PlanOptions, cfg: dict[str, Any], target: TargetSig | None,
                 lin=None) -> float:
    """Bytes per weight element: the profile's operand dtype; else the dtype the parameter is
    declared with in the source (`params_dtype=torch.float32` routers); else --dtype; else the
    config's dtype; else bf16."""
    if target is not None and target.dtypes:
        parts = target.dtypes.split(";")
        b = dtype_bytes(parts[1] if len(parts) > 1 and parts[1] else parts[0])
        if b:
            return float(b)
    if lin is not None and getattr(lin, "dtype_bytes", None):
        return float(lin.dtype_bytes)
    name = (opts.dtype or cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")
    b = dtype_bytes(str(name).replace("torch.", ""))
    if b is None:
        raise InputError(f"--dtype must be bf16, fp16, int8 or fp32, not {name!r}")
    return float(b)


def _weight(m: Mapped, b: float, cfg: dict[str, Any], opts: PlanOptions) -> Weight:
    lin = m.target
    role = m.role
    hidden = cfg.get("hidden_size")
    inter = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    epr = opts.experts_per_rank
    if role in ("gmm1", "gmm2") and epr is None:
        epr = lin.dims[0] if lin.dims else None
    return Weight(tuple(lin.dims or ()), b, role, hidden, inter, opts.moe_tp, epr)


def size_mapped(m: Mapped, cand: Candidate | None, hw, opts: PlanOptions, in_flight: int,
          cfg: dict[str, Any] | None = None) -> Sized:
    t = cand.target if cand else None
    b = element_bytes(opts, cfg or {}, t, m.target)
    w = _weight(m, b, cfg or {}, opts)
    if cand is None:
        return size_site(w, WindowTime(None), None, hw, in_flight=in_flight,
                         user_cap=opts.max_size_cap, cmo_bw_gbps=opts.cmo_bw_gbps,
                         pol=opts.policy)
    # an "earlier" insertion also overlaps work before the window (a MatMul): that time is not
    # free bandwidth, so only the measured window counts (and the site ranks after exact ones)
    time_us = effective_window_us(cand, m)
    wbytes = effective_window_bytes(cand, m)
    g = GainInputs(cand.mean_us, int(t.bytes or t.weight_bytes or 0), float(t.t_compute_us or 0.0),
                   cand.per_step, time_us, int(wbytes), cmo_gbps=opts.cmo_bw_gbps)
    hit = experts_hit(m, t, cfg or {}, opts.experts_per_rank)
    if hit is not None:   # only the experts the tokens hit are read (moe.py)
        g = replace(g, useful_share=hit.share)
    sized = size_site(w, WindowTime(time_us, wbytes), g, hw, in_flight=in_flight,
                      user_cap=opts.max_size_cap, cmo_bw_gbps=opts.cmo_bw_gbps,
                      pol=opts.policy)
    if hit is None:
        return sized
    floor = float(opts.policy["sizing"]["moe_min_hit_share"])
    blocked = "" if hit.share >= floor else said("said.moe_blocked", share=hit.share, floor=floor)
    return replace(sized, notes=sized.notes + (f"MoE: {hit.text()}",), blocked=blocked)


def experts_hit(m: Mapped, t: TargetSig, cfg: dict[str, Any], experts_per_rank: int | None = None):
    """Expected experts hit per call of a GroupedMatmul target (None for dense targets or when
    the config does not name the experts and top-k). The experts on the rank: `--experts-per-rank`,
    else the profiled GMM's own weight (its leading dim is what the rank holds under expert
    parallelism), else the source's Parameter (often every expert: a source sized for one rank
    says nothing about EP; issue 30: 128 where the rank held 8 gave a 25 % share for 68 %)."""
    if m.role not in ("gmm1", "gmm2") or not t.m:
        return None
    from ..moe import from_config, measured_hit
    if t.measured_read_bytes:   # MemoryAccess counters: the bytes read are measured
        return measured_hit(t.measured_read_bytes, t.weight_bytes, t.other_input_bytes)
    dims = m.target.dims or ()
    e_rank = experts_per_rank or (t.weight_shape[0] if len(t.weight_shape) == 3 else 0) or \
        (dims[0] if len(dims) == 3 else 0)
    return from_config(cfg, int(t.m), int(e_rank))


def effective_window_us(cand: Candidate, m: Mapped) -> float:
    """The usable time of the window the plan costs: the placed one (build.py `_placed`)."""
    return float(cand.window.time_us)


def effective_window_bytes(cand: Candidate, m: Mapped) -> int:
    """What the placed window's ops move (they compete with the prefetch for HBM)."""
    return int(sum(o.bytes for o in cand.window.ops))


def hbm_bps(hw) -> float | None:
    """HBM bytes/s of the part: window ops without counters are classed by roofline time."""
    return getattr(hw, "hbm_bw_bytes_per_s", None)
