"""Stage 5: how much to prefetch (seed 003 "预取大小确定", REFERENCE.md §5, CONTRACTS "Defaults").

max_size = min(weight bytes x coefficient, the binding caps), caps shown side by side:
  - hbm_headroom: HBM bandwidth x the window's usable time, minus what the window's own ops move
    (a fact of the profile and the part);
  - l2_budget: L2 x policy sizing.l2_budget_share, shared by the sites in flight together;
  - user: `--max-size-cap`;
  - cmo_rate_x_window: one CMO stream's rate x the window. The rate (285 GB/s) is ONE public
    measurement, so by default this cap is a risk, shown but not binding; it binds when the user
    gives the rate (`--cmo-bw`) or `report` calibrated it from CMO tasks in a prefetch-on profile
    (the next plan carries it).
The smallest binding cap applies and is named in `basis.bound_by`. The coefficient starts at 0.5
(seed 003's first rung); the ladder (0.7 -> 1.0 up, 0.3 -> 0.1 down) is recorded for tuning, and
in bytes (`ladder_bytes`): an up rung is that share of the weight, up to the whole weight, but
never past the budget (the smallest binding cap: a window carries no more); a down rung scales
the planned size as the seed's rungs scale 0.5. `max_size` is always a positive int.

Seed formulas (b = bytes per element): q/o H*H*b, gate_up H*I*2*b, down I*H*b, QBMM (int8)
H*H*1, MoE `gmm1 = H*I*2*b // moe_tp * experts_per_rank // 2`, `gmm2 = H*I*b // moe_tp *
experts_per_rank`. The GMM formulas give the size to use directly (coefficient 1.0, recorded).

Benefit: gain.py (one function for every stage); `size_site` calls it with the size it chose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .gain import GainInputs, expected
from .i18n import said
from .contract.plan import Basis, Cap, Saving
from .policy import Policy

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
class Sized:
    max_size: int
    basis: Basis
    ladder: dict[str, list[float]]
    saving_us: Saving | None           # per step (per op x instances per step); None: no profile
    saving_per_op: Saving | None
    optimistic: bool
    weight_bytes: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    gain_inputs: GainInputs | None = None   # what the plan records so report can recompute
    blocked: str = ""                  # why the site is not worth it whatever its gain (MoE)
    ladder_bytes: dict[str, list[int]] = field(default_factory=dict)   # the rungs as sizes

    @property
    def mid(self) -> float:
        """The ranking key: expected saving per step (mid); 0 when unknown."""
        return self.saving_us.mid if self.saving_us is not None else 0.0


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
            n = int(hi * 2 * b) // w.moe_tp * w.experts_per_rank // 2
        else:
            n = int(hi * b) // w.moe_tp * w.experts_per_rank
        # the formula reads H and I from the config: never more than the weight itself holds
        # (a 3-D gate bank of another shape, fewer experts on the rank than experts_per_rank)
        return min(n, w.nbytes), FORMULAS[w.role]
    return w.nbytes, FORMULAS.get(w.role, FORMULAS["linear"])


def cmo_cap(gbps: float, window_us: float, given_by: str = "") -> Cap:
    """One CMO stream's rate x the window: binding only when the rate was given or measured
    (`given_by` says how); else shown as a risk (the 285 GB/s default is one public figure)."""
    n = int(gbps * 1e9 * max(window_us, 0.0) * 1e-6)
    if given_by:
        return Cap("cmo_rate_x_window", n, said("said.cap_cmo", gbps=gbps, given_by=given_by, t=window_us))
    return Cap("cmo_rate_x_window", n, said("said.cap_cmo_risk", gbps=gbps, t=window_us), False)


def bound_size(base: int, caps) -> tuple[int, str]:
    """(bytes, what bound it): `base` (the coefficient's share of the weight) or the smallest
    binding cap below it. The one rule for analyze's sizing and the report's next coefficient;
    a cap with `binding: false` (the default CMO rate) is a risk shown in the plan, never a bound,
    and the weight cap is what `base` is a share of."""
    size, by = base, "coefficient"
    for c in caps:
        if c.name != "weight" and c.binding and c.bytes < size:
            size, by = int(c.bytes), c.name
    return size, by


def size_site(w: Weight, window: WindowTime, gain_in: GainInputs | None, hw: Any, *, in_flight: int = 1,
              user_cap: int | None = None, coefficient: float | None = None,
              cmo_bw_gbps: float | None = None, pol: Policy) -> Sized:
    """Size one site. `hw`: a HardwareProfile (hbm_bw_bytes_per_s, l2_bytes, cmo_bw_gbps)."""
    sz = pol["sizing"]
    coef = float(sz["coefficient"] if coefficient is None else coefficient)
    if not 0 < coef <= 1:
        raise InputError(f"coefficient must be in (0, 1], not {coef}")
    theory, formula = theoretical_bytes(w)
    gmm = w.role in ("gmm1", "gmm2")
    use_coef = 1.0 if gmm else coef
    notes: list[str] = []
    if gmm:
        notes.append("the workflow's GMM formula (docs/planning.md) gives the prefetch size directly (coefficient 1.0)")
    dims_txt = "x".join(map(str, w.dims))
    caps = [Cap("weight", theory, f"{dims_txt} x {w.dtype_bytes:g} B ({formula})")]
    base = int(theory * use_coef)
    cmo = float(cmo_bw_gbps or getattr(hw, "cmo_bw_gbps", None) or sz["cmo_bw_gbps"])
    cmo_given = cmo_bw_gbps is not None or "cmo_bw_gbps" in (getattr(hw, "overrides", {}) or {})
    hbm = float(hw.hbm_bw_bytes_per_s)
    if window.time_us is not None:
        t = max(window.time_us, 0.0)
        head = int(hbm * t * 1e-6) - int(window.bytes)
        caps.append(Cap("hbm_headroom", max(head, 0),
                        said("said.cap_hbm", hbm=hbm / 1e12, t=t, mib=window.bytes / 2**20)))
        caps.append(cmo_cap(cmo, t, "--cmo-bw" if cmo_given else ""))
    else:
        notes.append("no profile: the window caps (CMO rate, HBM headroom) are unknown")
    l2 = getattr(hw, "l2_bytes", None)
    if l2:
        share = float(sz["l2_budget_share"])
        caps.append(Cap("l2_budget", int(l2 * share / max(in_flight, 1)),
                        said("said.cap_l2", share=share, mib=l2 / 2**20, n=max(in_flight, 1))))
    if user_cap is not None:
        if user_cap <= 0:
            raise InputError(f"--max-size-cap must be a positive number of bytes, not {user_cap}")
        caps.append(Cap("user", int(user_cap), "--max-size-cap"))
    size, bound_by = bound_size(base, caps)
    if size < 1:
        notes.append(f"the {bound_by} cap leaves nothing to prefetch; max_size set to 1 byte")
        size = 1
    basis = Basis(tuple(int(d) for d in w.dims), float(w.dtype_bytes), use_coef, tuple(caps),
                  bound_by, f"{formula} x {use_coef:g}")
    ladder = {"up": [float(x) for x in sz["ladder_up"]],
              "down": [float(x) for x in sz["ladder_down"]]}
    budget = min((c.bytes for c in caps[1:] if c.binding), default=None)
    rungs = rung_sizes(theory, int(size), use_coef, budget, ladder)
    g_in = gain_in.stored() if gain_in is not None else None
    g = expected(int(size), g_in, hw, pol)
    if g is not None and g.optimistic:
        notes.append(said("said.optimistic", per_op=g.per_op.mid, mean=g_in.mean_us,
                          share=pol["benefit"]["optimistic_op_share"]))
    return Sized(int(size), basis, ladder, g.per_step if g else None, g.per_op if g else None,
                 bool(g and g.optimistic), theory, tuple(notes), g_in, ladder_bytes=rungs)


def rung_sizes(weight: int, size: int, coef: float, budget: int | None,
               ladder: dict[str, list[float]]) -> dict[str, list[int]]:
    """The ladder in bytes. Up: share x weight (1.0 = the whole weight), at most `budget` (the
    smallest binding cap, None = none). Down: the planned size scaled by rung / coefficient (0.3
    and 0.1 of 0.5), so a size the budget already cut still goes down. Each at least 1 byte."""
    up = [max(1, min(int(weight * c), budget if budget is not None else weight))
          for c in ladder.get("up", []) if c > coef]      # a GMM sized at 1.0 has no rung up
    down = [max(1, int(size * c / coef)) for c in ladder.get("down", []) if 0 < c < coef]
    return {"up": up, "down": down}

