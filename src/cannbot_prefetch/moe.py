"""Expected experts hit per rank: whether a GroupedMatmul (MoE experts) prefetch is worth it and
how many of its bytes count as saved (issue 10 item 6).

Routing model: each token picks `top_k` distinct experts out of the model's `E`, uniformly and
independently (the load-balanced ideal routers are trained towards; a skewed router hits fewer
distinct experts for the same traffic, so this is an upper bound on hits). One given expert is
missed by one token with probability (E - k) / E = 1 - k/E, by all T tokens with (1 - k/E)^T, so
the expected share of experts hit is

    p = 1 - (1 - k/E)^T        expected experts hit on a rank = E_rank x p

(the occupancy expectation of balls into bins, k distinct bins per ball). One token hits k/E of
the experts (8/128 = 6 % for Qwen3-MoE); vllm-ascend prefetched MoE weights only from ~96 tokens,
where p = 99.8 % for 8 of 128 (docs/sources.md).

T comes from the GroupedMatmul's own rows, the (token, expert) pairs routed to this rank: in
expectation M_total = T x k x E_rank / E, so T = M_total x E / (k x E_rank).

Where the profile carries MemoryAccess counters (`*_read_main_memory_datas(KB)`), the bytes a
call really read are measured: the share of the stored expert weight read is (bytes read - the
other inputs as stored) / weight bytes, and that measured share replaces the routing model
(`measured_hit`).

Offset and size: the prefetch starts at offset 0 of the rank's [E_rank, N, K] weight and covers
the first max_size bytes (the seed's GMM formulas). Routing is decided after the prefetch is
issued, so which experts will be hit is unknown: each prefetched expert is read with probability
p, so max_size x p bytes count as saved (gain.py `useful_share`). Below policy
`sizing.moe_min_hit_share` most prefetched bytes are traffic the GMM never reads: not planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fmt import mib

EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts")


@dataclass(frozen=True)
class ExpertsHit:
    experts: int          # E, the model's routed experts
    top_k: int            # k
    experts_rank: int     # E_rank, experts this rank holds
    rows: int             # M_total, the GMM's rows (token, expert) pairs
    tokens: float         # T, tokens routed over all ranks
    share: float          # p = 1 - (1 - k/E)^T
    hit: float            # E_rank x p

    def text(self) -> str:
        return (f"{self.rows} routed rows = {self.tokens:g} token(s) x top-{self.top_k} of "
                f"{self.experts} experts: p = 1 - (1 - {self.top_k}/{self.experts})^{self.tokens:g} "
                f"= {self.share:.3f}, {self.hit:.1f} of this rank's {self.experts_rank} experts "
                f"hit per call; the prefetch runs from offset 0, so {self.share:.1%} of its bytes "
                "count as saved")


@dataclass(frozen=True)
class MeasuredHit:
    """The share of a GroupedMatmul's stored expert weight its calls read, from MemoryAccess."""

    read_bytes: float     # mean bytes read from main memory per call
    weight_bytes: int     # the stored expert weight (all experts of this rank)
    other_bytes: int      # x, scales, group list ... as stored
    share: float          # (read - other) / weight, within [0, 1]

    def text(self) -> str:
        return (f"measured (MemoryAccess): {mib(self.read_bytes)} read per call, "
                f"{mib(self.other_bytes)} of them inputs other than the weight: "
                f"{self.share:.1%} of the {mib(self.weight_bytes)} expert weight read; "
                f"the prefetch runs from offset 0, so {self.share:.1%} of its bytes count as saved")


def measured_hit(read_bytes: float | None, weight_bytes: int | None,
                 other_bytes: int | None) -> MeasuredHit | None:
    """None without a measured read or a weight size."""
    if not read_bytes or not weight_bytes or weight_bytes <= 0:
        return None
    other = max(int(other_bytes or 0), 0)
    share = min(max((read_bytes - other) / weight_bytes, 0.0), 1.0)
    return MeasuredHit(float(read_bytes), int(weight_bytes), other, share)


def config_int(cfg: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def experts_hit(rows: int, top_k: int, experts: int, experts_rank: int) -> ExpertsHit:
    tokens = rows * experts / (top_k * experts_rank)
    share = 1.0 - (1.0 - min(top_k, experts) / experts) ** tokens
    return ExpertsHit(experts, top_k, experts_rank, rows, round(tokens, 3), share,
                      experts_rank * share)


def from_config(cfg: dict[str, Any], rows: int, experts_rank: int) -> ExpertsHit | None:
    """None when the config does not name the experts and top-k (then nothing is assumed)."""
    e, k = config_int(cfg, EXPERT_KEYS), config_int(cfg, TOP_K_KEYS)
    if not e or not k or rows <= 0 or experts_rank <= 0:
        return None
    return experts_hit(rows, k, e, min(experts_rank, e))
