"""Stage 3 values: the frozen dataclasses that leave the windows stage (no DataFrame)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

LIGHT, HEAVY, COMM = "light", "memory_heavy", "communication"


# ------------------------------------------------------------------------------ values out

@dataclass(frozen=True)
class TargetSig:
    """What later stages need of a roofline signature (duck-typed from SignatureCost)."""

    sig_id: int
    type: str
    input_shapes: str = ""  # "" when the profile has no shapes (trace_view, Level0)
    dtypes: str = ""
    formats: str = ""
    family: str = "matmul"
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    weight_shape: tuple[int, ...] = ()
    weight_bytes: int = 0
    bytes: int = 0
    flops: float = 0.0
    count: int = 0
    total_us: float = 0.0
    mean_us: float = 0.0
    share: float = 0.0
    t_memory_us: float = 0.0
    t_compute_us: float = 0.0
    verdict: str = "memory-bound"
    measured_verdict: str | None = None
    mean_mac_ratio: float | None = None
    mean_mte2_ratio: float | None = None
    compute_dtype: str = "bf16"
    ai: float = 0.0
    ridge: float = 0.0
    evidence: str | None = None          # what decided the measured verdict (verdict.py)
    evidence_why: str | None = None
    hbm_share: float | None = None
    measured_read_bytes: float | None = None   # MemoryAccess: mean bytes read per call
    other_input_bytes: int = 0           # inputs other than the weight, as stored

    @property
    def label(self) -> str:
        return f"{self.type} {self.input_shapes or '?'}"

    @staticmethod
    def of(sig: Any) -> "TargetSig":
        if isinstance(sig, TargetSig):
            return sig
        kw = {}
        for f in TargetSig.__dataclass_fields__:
            if hasattr(sig, f):
                v = getattr(sig, f)
                if v is None and f not in ("measured_verdict", "mean_mac_ratio",
                                           "mean_mte2_ratio", "evidence", "evidence_why",
                                           "hbm_share", "measured_read_bytes"):
                    continue
                kw[f] = tuple(v) if f == "weight_shape" else v
        return TargetSig(**kw)


@dataclass(frozen=True)
class PredOp:
    """One predecessor (framework op or kernel) as seen at a representative instance."""

    type: str
    name: str
    cls: str               # light | memory_heavy | communication
    why: str               # how the class was decided
    dur_us: float
    bytes: int
    shapes: str = ""
    stack: str = ""

    def brief(self) -> str:
        return f"{self.type} ({self.cls}, {self.dur_us:.1f} µs)"


def _lead_time(k: int, doc: str) -> property:
    """LeadOp's k-th time (`times`), read as an attribute."""
    return property(lambda self: self._times[k], doc=doc)


@dataclass(frozen=True)
class LeadOp:
    """An op before the target (nearest first), with the times a placed window is costed from:
    medians over the cluster's agreeing instances, in us before the target's start. `times`
    gives them, worked out when first read (windows/find.py `_LeadTimes`)."""

    op: PredOp
    matmul: bool           # a MatMul-family kernel (a linear in the model source)
    times: Callable[[], tuple[float, float, float, float]] = field(repr=False, compare=False)

    @cached_property
    def _times(self) -> tuple[float, float, float, float]:
        return self.times()

    start_us = _lead_time(0, "Target start - this op's start.")
    end_us = _lead_time(1, "Target start - this op's end (a prefetch issued after it starts "
                           "here).")
    overlap_us = _lead_time(2, "Heavy / communication work on other streams in [end, target "
                               "start).")
    min_free_us = _lead_time(3, "Smallest (end - overlap) over the instances.")


@dataclass(frozen=True)
class Window:
    branch: str            # "3a" (large MatMul output) | "3b" (light predecessor input)
    start: str             # "input" | "output" of start_op
    start_op: PredOp
    ops: tuple[PredOp, ...]  # predecessors the window covers, nearest first
    time_us: float         # usable time, median over agreeing instances
    min_us: float
    raw_us: float          # median span before subtracting other-stream overlap
    overlap_us: float      # median heavy/comm work on other streams inside the span
    instances: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "start": self.start, "start_op": self.start_op.type,
                "ops": [o.type for o in reversed(self.ops)],   # in execution order
                "time_us": round(self.time_us, 3),
                "min_us": round(self.min_us, 3), "raw_us": round(self.raw_us, 3),
                "overlap_us": round(self.overlap_us, 3), "instances": self.instances,
                "reason": self.reason}


@dataclass(frozen=True)
class Candidate:
    target: TargetSig
    cluster: int           # order of this call site among the signature's clusters (first seen first)
    clusters: int          # how many clusters the signature has
    instances: int
    per_step: float
    mean_us: float         # mean duration of this cluster's instances
    window: Window
    stack: tuple[str, ...] = ()         # target's call stack, innermost first
    window_stack: tuple[str, ...] = ()  # the window start op's call stack
    preds: tuple[PredOp, ...] = ()      # all examined predecessors, nearest first
    stream: str | None = None
    site_rank: int = 0     # order within the layer among this signature's calls at one frame
    lead: tuple[LeadOp, ...] = ()       # ops before the target, nearest first (placed windows)
    lead_stack: str = ""                # the target's stack at the instance `lead` was read at
    # the nearest light start's candidate, when a finished MatMul's output (3a) gave a longer
    # window: mapping may have no legal place at that output (windows/find.py `_longer`)
    nearer: "Candidate | None" = None

    @property
    def key(self) -> str:
        return f"{self.target.sig_id}.{self.cluster}"


@dataclass(frozen=True)
class Rejection:
    signature: str
    reason_code: str
    reason: str
    target: TargetSig | None = None
    cluster: int = 0
    clusters: int = 1
    instances: int = 0
    per_step: float = 0.0
    mean_us: float = 0.0
    preds: tuple[PredOp, ...] = ()
    stack: tuple[str, ...] = ()
    site: str = ""         # class.attr when mapping got that far
    site_rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"signature": self.signature, "reason_code": self.reason_code,
                             "reason": self.reason}
        if self.site:
            d["site"] = self.site
        if self.preds:
            d["predecessors"] = [p.brief() for p in self.preds]
        return d


@dataclass(frozen=True)
class WindowResult:
    candidates: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...]
    notes: tuple[str, ...] = ()
