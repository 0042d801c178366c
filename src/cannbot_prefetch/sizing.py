"""Stage 5: how much to prefetch, and what it may save (seed 003 "预取大小确定", REFERENCE.md §5).

max_size = min(weight bytes x coefficient, caps...), caps shown side by side:
  - cmo_rate_x_window: one CMO stream's rate (policy sizing.cmo_bw_gbps / the hardware profile,
    `--cmo-bw`) x the window's usable time;
  - hbm_headroom: HBM bandwidth x window time, minus what the window's own ops move;
  - l2_budget: L2 x policy sizing.l2_budget_share, shared by the sites in flight together;
  - user: `--max-size-cap`.
The smallest applies and is named in `basis.bound_by`. The coefficient starts at 0.5; the ladder
(0.7 -> 1.0 up, 0.3 -> 0.1 down) is recorded for tuning. `max_size` is always a positive int.

Seed formulas (b = bytes per element): q/o H*H*b, gate_up H*I*2*b, down I*H*b, QBMM (int8)
H*H*1, MoE `gmm1 = H*I*2*b // moe_tp * experts_per_rank // 2`, `gmm2 = H*I*b // moe_tp *
experts_per_rank`. The GMM formulas give the size to use directly (coefficient 1.0, recorded).

Benefit (per op): saved = P / BW_eff * (1 - BW_eff / BW_L2), BW_eff = what the op achieves from
HBM (its bytes / its measured time, at most the HBM peak), BW_L2 = (3.4 .. 5) x HBM (low / high,
mid between); bounded by the op's time minus its compute floor, minus the window slowdown when
the prefetch and the window's own traffic exceed HBM bandwidth. A per-op prediction above
policy sizing.optimistic_saving_share (30%) is flagged as optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .plan import Basis, Cap, Saving
from .settings import policy

# role -> (formula label for the theoretical size, what H / I stand for)
FORMULAS = {
    "q": "H*H*b", "o": "H*H*b", "qkv": "(Hq+2*Hkv)*H*b", "k": "Hkv*H*b", "v": "Hkv*H*b",
    "gate_up": "H*I*2*b", "gate": "H*I*b", "up": "H*I*b", "down": "I*H*b",
    "qbmm": "H*H*1", "lm_head": "V*H*b", "router": "E*H*b", "linear": "N*K*b",
    "gmm1": "H*I*2*b // moe_tp * experts_per_rank // 2",
    "gmm2": "H*I*b // moe_tp * experts_per_rank",
}


@dataclass(frozen=True)
class Weight:
    """A weight to prefetch: dims as stored (per rank), bytes per element, its role."""

    dims: tuple[int, ...]
    dtype_bytes: float
    role: str = "linear"
    hidden: int | None = None          # H, for the MoE formulas
    intermediate: int | None = None    # I (moe_intermediate_size for experts)
    moe_tp: int = 1
    experts_per_rank: int | None = None

    @property
    def nbytes(self) -> int:
        return int(math.ceil(math.prod(self.dims) * self.dtype_bytes))


@dataclass(frozen=True)
class WindowTime:
    """What sizing needs of a window; None time = no profile (manual mode)."""

    time_us: float | None
    bytes: int = 0                     # bytes the window's own ops move


@dataclass(frozen=True)
class OpTiming:
    """The target op as measured (per instance) and its roofline floors."""

    mean_us: float
    bytes: int                          # bytes one instance moves
    t_compute_us: float = 0.0
    per_step: float = 1.0               # instances per step


@dataclass(frozen=True)
class Sized:
    max_size: int
    basis: Basis
    ladder: dict[str, list[float]]
    saving_us: Saving                  # per step (per op x instances per step)
    saving_per_op: Saving
    optimistic: bool
    weight_bytes: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def theoretical_bytes(w: Weight) -> tuple[int, str]:
    """The seed's theoretical size for this weight and the formula used."""
    if w.role in ("gmm1", "gmm2"):
        if not w.experts_per_rank or w.experts_per_rank < 1:
            raise InputError(f"{w.role}: experts_per_rank is needed (--experts-per-rank)")
        if w.moe_tp < 1:
            raise InputError(f"--moe-tp must be at least 1, not {w.moe_tp}")
        h, i = w.hidden, w.intermediate
        if not h or not i:     # per-expert dims [2I, H] / [H, I] (either order)
            per_expert = math.prod(w.dims[-2:])
            hi = per_expert // 2 if w.role == "gmm1" else per_expert
        else:
            hi = h * i
        b = w.dtype_bytes
        if w.role == "gmm1":
            return int(hi * 2 * b) // w.moe_tp * w.experts_per_rank // 2, FORMULAS["gmm1"]
        return int(hi * b) // w.moe_tp * w.experts_per_rank, FORMULAS["gmm2"]
    return w.nbytes, FORMULAS.get(w.role, FORMULAS["linear"])


def size_site(w: Weight, window: WindowTime, op: OpTiming | None, hw: Any, *, in_flight: int = 1,
              user_cap: int | None = None, coefficient: float | None = None,
              cmo_bw_gbps: float | None = None, pol: dict[str, Any] | None = None) -> Sized:
    """Size one site. `hw`: a HardwareProfile (hbm_bw_bytes_per_s, l2_bytes, cmo_bw_gbps)."""
    pol = pol or policy()
    sz = pol["sizing"]
    coef = float(sz["coefficient"] if coefficient is None else coefficient)
    if not 0 < coef <= 1:
        raise InputError(f"coefficient must be in (0, 1], not {coef}")
    theory, formula = theoretical_bytes(w)
    gmm = w.role in ("gmm1", "gmm2")
    use_coef = 1.0 if gmm else coef
    notes: list[str] = []
    if gmm:
        notes.append("the seed's GMM formula gives the prefetch size directly (coefficient 1.0)")
    dims_txt = "x".join(map(str, w.dims))
    caps = [Cap("weight", theory, f"{dims_txt} x {w.dtype_bytes:g} B ({formula})")]
    base = int(theory * use_coef)
    cmo = float(cmo_bw_gbps or getattr(hw, "cmo_bw_gbps", None) or sz["cmo_bw_gbps"])
    hbm = float(hw.hbm_bw_bytes_per_s)
    if window.time_us is not None:
        t = max(window.time_us, 0.0)
        caps.append(Cap("cmo_rate_x_window", int(cmo * 1e9 * t * 1e-6),
                        f"{cmo:g} GB/s x {t:.1f} us"))
        head = int(hbm * t * 1e-6) - int(window.bytes)
        caps.append(Cap("hbm_headroom", max(head, 0),
                        f"{hbm / 1e12:g} TB/s x {t:.1f} us - {window.bytes / 2**20:.1f} MiB "
                        "moved by the window's ops"))
    else:
        notes.append("no profile: the window caps (CMO rate, HBM headroom) are unknown")
    l2 = getattr(hw, "l2_bytes", None)
    if l2:
        share = float(sz["l2_budget_share"])
        caps.append(Cap("l2_budget", int(l2 * share / max(in_flight, 1)),
                        f"{share:g} of {l2 / 2**20:.0f} MiB L2 shared by {max(in_flight, 1)} "
                        "site(s) in flight"))
    if user_cap is not None:
        if user_cap <= 0:
            raise InputError(f"--max-size-cap must be a positive number of bytes, not {user_cap}")
        caps.append(Cap("user", int(user_cap), "--max-size-cap"))
    bound_by, size = "coefficient", base
    for c in caps[1:]:
        if c.bytes < size:
            bound_by, size = c.name, c.bytes
    if size < 1:
        notes.append(f"the {bound_by} cap leaves nothing to prefetch; max_size set to 1 byte")
        size = 1
    basis = Basis(tuple(int(d) for d in w.dims), float(w.dtype_bytes), use_coef, tuple(caps),
                  bound_by, f"{formula} x {use_coef:g}")
    ladder = {"up": [float(x) for x in sz["ladder_up"]],
              "down": [float(x) for x in sz["ladder_down"]]}
    per_op, opt = (Saving(0.0, 0.0, 0.0), False)
    if op is not None:
        per_op, opt = benefit(size, op, window, hw, pol)
        if opt:
            notes.append(f"optimistic: predicted {per_op.mid:.1f} of {op.mean_us:.1f} us per op "
                         f"(> {sz['optimistic_saving_share']:.0%}); public gains are 0.35-8.9%")
    per_step = op.per_step if op else 1.0
    total = Saving(*(round(v * per_step, 3) for v in (per_op.low, per_op.mid, per_op.high)))
    return Sized(int(size), basis, ladder, total, per_op, opt, theory, tuple(notes))


def benefit(p_bytes: int, op: OpTiming, window: WindowTime, hw: Any,
            pol: dict[str, Any] | None = None) -> tuple[Saving, bool]:
    """Time saved per op (low, mid, high) by prefetching p_bytes, and whether it is optimistic."""
    pol = pol or policy()
    lo_r, hi_r = (float(x) for x in pol["benefit"]["l2_to_hbm_bw_ratio"])
    hbm = float(hw.hbm_bw_bytes_per_s)
    t_op = op.mean_us * 1e-6
    bw_eff = min(op.bytes / t_op, hbm) if t_op > 0 and op.bytes > 0 else hbm
    ceiling = max(op.mean_us - op.t_compute_us, 0.0)
    slowdown = 0.0
    if window.time_us is not None:
        need = (p_bytes + window.bytes) / hbm * 1e6
        slowdown = max(need - window.time_us, 0.0)
    out = []
    for ratio in (lo_r, (lo_r + hi_r) / 2, hi_r):
        bw_l2 = ratio * hbm
        saved = p_bytes / bw_eff * (1 - bw_eff / bw_l2) * 1e6
        out.append(round(max(min(saved, ceiling) - slowdown, 0.0), 3))
    s = Saving(*out)
    share = float(pol["sizing"]["optimistic_saving_share"])
    return s, op.mean_us > 0 and s.mid / op.mean_us > share
