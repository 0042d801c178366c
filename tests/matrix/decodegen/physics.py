"""The physical model of a GENERATED kernel: its duration and PipeUtilization counters.

ONE stated formula, nothing measured, and nothing shared with cannbot_prefetch (this package
imports nothing from it). Hardware numbers: REFERENCE.md §4.1 (CANN platform ini peaks,
peak = 2 * 16*16*16 * cube cores * MHz; the DEFAULT HBM column):

    part   cube/vector cores  MHz   bf16 TFLOPS  HBM TB/s  L2
    910B3  20 / 40            1800  294.912      1.6       192 MiB
    910B4  20 / 40            1500  245.76       0.8        96 MiB

Per kernel, from the bytes it reads and writes in HBM and the work it does:

    mte2     = bytes read    / HBM_BW / EFF_MEM      (the load pipe; cube and vector)
    mte3     = bytes written / HBM_BW / EFF_MEM      (vector store pipe; `fixpipe` on cube ops)
    mac      = FLOPs         / cube peak / EFF_CUBE
    vec      = element-ops   / vector peak / EFF_VEC
    busy     = max(pipes) + CORE_FIXED_US            (aicore_time / aiv_time: the pipes overlap)
    duration = busy + HEAD_US                        (task head and tail outside the cores)
    ratio(p) = p / busy                              (what PipeUtilization reports)

so `duration = max(bytes/BW/EFF_MEM, flops/peak/EFF_CUBE) + 2.5 µs` for a MatMul, and a kernel
is memory-bound by its counters exactly when its memory pipe fills most of its busy time, which
happens when its bytes are large against CORE_FIXED_US. Constants (choices, stated here once):
EFF_MEM 0.8, EFF_CUBE 0.75, EFF_VEC 0.5, CORE_FIXED_US 1.0, HEAD_US 1.5; vector peak =
vector cores * 128 element-ops per cycle * MHz (an assumption: 910B3 9.2 T/s). Other pipes:
aic_mte1 = 0.6 * mac (L1 -> L0 feeds the cube), aic_scalar = 0.1 * busy, aiv_scalar =
0.15 * busy. Cycles: total_cycles = busy * MHz * block dim.

Per (seed, step, kernel) a jitter factor f = 1 + U(-JITTER, +JITTER) (the warm-up step, step 1,
also * WARMUP) multiplies the duration and every pipe time alike: the ratios are exact functions
of the op and the part, so an op's counter verdict never depends on the seed.

HCCL all-reduce / all-gather (tensor parallel): duration = HCCL_LATENCY_US +
2 * (tp - 1) / tp * bytes / HCCS_GBPS (ring; 56 GB/s is the public per-link HCCS figure, an
assumption); no counters (N/A), as in real HCCL rows.

The measured verdict each op gets in the truth (truth.py) is CONTRACTS.md's rule applied to
these ratios: memory-bound when mte2 >= 0.8 and > mac (vec for vector ops); compute-bound when
mac (vec) >= 0.8 and >= mte2; otherwise latency-bound.
"""

from __future__ import annotations

from dataclasses import dataclass

EFF_MEM = 0.8
EFF_CUBE = 0.75
EFF_VEC = 0.5
CORE_FIXED_US = 1.0
HEAD_US = 1.5
VECTOR_OPS_PER_CYCLE = 128
MTE1_OF_MAC = 0.6
AIC_SCALAR = 0.1
AIV_SCALAR = 0.15
JITTER = 0.02
WARMUP = 1.3
HCCL_LATENCY_US = 15.0
HCCS_GBPS = 56.0
# CONTRACTS.md "Measured verdict (PipeUtilization)" threshold.
BOUND_RATIO = 0.8


@dataclass(frozen=True)
class Part:
    name: str
    cube_cores: int
    vector_cores: int
    mhz: int
    bf16_tflops: float
    hbm_tbps: float
    l2_bytes: int

    @property
    def cube_peak(self) -> float:            # FLOP/s
        return self.bf16_tflops * 1e12

    @property
    def vector_peak(self) -> float:          # element-ops/s
        return self.vector_cores * VECTOR_OPS_PER_CYCLE * self.mhz * 1e6

    @property
    def hbm_bps(self) -> float:
        return self.hbm_tbps * 1e12


PARTS = {
    "910B3": Part("910B3", 20, 40, 1800, 294.912, 1.6, 192 * 2**20),
    "910B4": Part("910B4", 20, 40, 1500, 245.76, 0.8, 96 * 2**20),
}


def part(name: str) -> Part:
    key = name.upper().replace("ASCEND", "")
    if key not in PARTS:
        raise KeyError(f"unknown part {name!r}; known: {', '.join(PARTS)}")
    return PARTS[key]


@dataclass(frozen=True)
class Pipes:
    """Pipe times (µs) of one kernel before jitter, and what follows from them."""

    unit: str           # "aic" (cube, incl. the cube side of MIX_AIC) or "aiv" (vector)
    mte2: float
    mte3: float         # vector store; cube fixpipe
    compute: float      # mac (aic) or vec (aiv)
    busy: float
    # The vector side of a MIX_AIC kernel (attention's softmax): (vec, mte2, mte3) µs, or None.
    aiv_side: tuple[float, float, float] | None = None

    @property
    def duration(self) -> float:
        return self.busy + HEAD_US

    def ratio(self, t: float) -> float:
        return t / self.busy

    @property
    def mte2_ratio(self) -> float:
        """As written in kernel_details (3 decimals)."""
        return _r(self.ratio(self.mte2))

    @property
    def compute_ratio(self) -> float:
        """aic_mac_ratio or aiv_vec_ratio as written (3 decimals)."""
        return _r(self.ratio(self.compute))

    @property
    def verdict(self) -> str:
        mem, comp = self.mte2_ratio, self.compute_ratio
        if mem >= BOUND_RATIO and mem > comp:
            return "memory-bound"
        if comp >= BOUND_RATIO and comp >= mem:
            return "compute-bound"
        return "latency-bound"


def pipes(unit: str, hw: Part, *, read: float, write: float, flops: float = 0.0,
          elem_ops: float = 0.0, aiv_side: tuple[float, float, float] | None = None) -> Pipes:
    """The formula. unit "aic": `flops` on the cube; unit "aiv": `elem_ops` on the vector units.
    aiv_side: (element-ops, bytes read, bytes written) of a MIX kernel's vector part, which runs
    alongside the cube part (it adds to busy only when it is the longer one)."""
    mte2 = read / hw.hbm_bps / EFF_MEM * 1e6
    mte3 = write / hw.hbm_bps / EFF_MEM * 1e6
    comp = (flops / hw.cube_peak / EFF_CUBE if unit == "aic" else elem_ops / hw.vector_peak / EFF_VEC) * 1e6
    side = None
    longest = max(mte2, mte3, comp)
    if aiv_side is not None:
        ops, r, w = aiv_side
        side = (ops / hw.vector_peak / EFF_VEC * 1e6, r / hw.hbm_bps / EFF_MEM * 1e6,
                w / hw.hbm_bps / EFF_MEM * 1e6)
        longest = max(longest, *side)
    return Pipes(unit, mte2, mte3, comp, longest + CORE_FIXED_US, side)


def hccl_us(nbytes: int, tp: int) -> float:
    return HCCL_LATENCY_US + 2 * (tp - 1) / tp * nbytes / (HCCS_GBPS * 1e9) * 1e6


def _r(x: float) -> float:
    return round(x, 3)


def counters(p: Pipes, f: float, blocks: int, hw: Part) -> dict[str, float | int]:
    """kernel_details PipeUtilization values of one kernel whose times are scaled by `f`."""
    busy = p.busy * f
    cyc = int(round(busy * hw.mhz * blocks))
    zero_aic = {"aicore_time(us)": 0.0, "aic_total_cycles": 0, "aic_mac_time(us)": 0.0,
                "aic_mac_ratio": 0.0, "aic_scalar_time(us)": 0.0, "aic_scalar_ratio": 0.0,
                "aic_mte1_time(us)": 0.0, "aic_mte1_ratio": 0.0, "aic_mte2_time(us)": 0.0,
                "aic_mte2_ratio": 0.0, "aic_fixpipe_time(us)": 0.0, "aic_fixpipe_ratio": 0.0,
                "aic_icache_miss_rate": 0.0}
    zero_aiv = {"aiv_time(us)": 0.0, "aiv_total_cycles": 0, "aiv_vec_time(us)": 0.0,
                "aiv_vec_ratio": 0.0, "aiv_scalar_time(us)": 0.0, "aiv_scalar_ratio": 0.0,
                "aiv_mte2_time(us)": 0.0, "aiv_mte2_ratio": 0.0, "aiv_mte3_time(us)": 0.0,
                "aiv_mte3_ratio": 0.0, "aiv_icache_miss_rate": 0.0}

    def aiv(vec: float, mte2: float, mte3: float, cycles: int) -> dict[str, float | int]:
        return {"aiv_time(us)": _r(busy), "aiv_total_cycles": cycles,
                "aiv_vec_time(us)": _r(vec * f), "aiv_vec_ratio": _r(vec / p.busy),
                "aiv_scalar_time(us)": _r(AIV_SCALAR * busy), "aiv_scalar_ratio": AIV_SCALAR,
                "aiv_mte2_time(us)": _r(mte2 * f), "aiv_mte2_ratio": _r(mte2 / p.busy),
                "aiv_mte3_time(us)": _r(mte3 * f), "aiv_mte3_ratio": _r(mte3 / p.busy),
                "aiv_icache_miss_rate": 0.001}

    if p.unit == "aiv":
        v = dict(zero_aic)
        v.update(aiv(p.compute, p.mte2, p.mte3, cyc))
        v["cube_utilization(%)"] = 0
        return v
    mac, mte1 = p.compute, min(MTE1_OF_MAC * p.compute, 0.95 * p.busy)
    v = {"aicore_time(us)": _r(busy), "aic_total_cycles": cyc,
         "aic_mac_time(us)": _r(mac * f), "aic_mac_ratio": _r(mac / p.busy),
         "aic_scalar_time(us)": _r(AIC_SCALAR * busy), "aic_scalar_ratio": AIC_SCALAR,
         "aic_mte1_time(us)": _r(mte1 * f), "aic_mte1_ratio": _r(mte1 / p.busy),
         "aic_mte2_time(us)": _r(p.mte2 * f), "aic_mte2_ratio": p.mte2_ratio,
         "aic_fixpipe_time(us)": _r(p.mte3 * f), "aic_fixpipe_ratio": _r(p.mte3 / p.busy),
         "aic_icache_miss_rate": 0.002}
    v.update(aiv(*p.aiv_side, int(round(busy * hw.mhz * 2 * blocks))) if p.aiv_side else zero_aiv)
    v["cube_utilization(%)"] = _r(100.0 * busy / (p.duration * f) * min(1.0, blocks / hw.cube_cores))
    return v
