"""Durations and PipeUtilization counters of generated kernels: ONE stated formula, nothing measured.

    dur_us = max(t_compute / EFF_COMPUTE, t_memory / EFF_MEMORY) + LAUNCH_OVERHEAD_US
    t_compute = FLOPs / peak          (cube ops: the part's fp16/bf16 peak;
                                       vector ops: the vector peak below, an assumption)
    t_memory  = bytes / HBM bandwidth (the DEFAULT column of REFERENCE.md §4.1)

    then, per (step, kernel), a deterministic jitter:  dur_us *= 1 + U(-JITTER, +JITTER)
    (random.Random(f"{seed}:{step}:{op index}")), and the first step (warm-up) is further
    multiplied by WARMUP_FACTOR.

Hardware numbers (REFERENCE.md §4.1, from the CANN platform ini; peak = 2*16*16*16*cores*MHz):

    part   cube/vector cores  MHz   bf16 TFLOPS  HBM TB/s (default)  L2
    910B3  20 / 40            1800  294.9        1.6                 192 MiB
    910B4  20 / 40            1500  245.8        0.8                  96 MiB

Constants (choices, not measurements): EFF_COMPUTE = 0.6, EFF_MEMORY = 0.7,
LAUNCH_OVERHEAD_US = 3.0, JITTER = 0.02, WARMUP_FACTOR = 1.25.
Vector peak (assumption, labelled): vector_cores * 128 element-ops/cycle * MHz
(910B3: 9.2 Tops/s). Vector FLOPs are "element-ops" = elements * a per-op-type factor set in
models.py (RmsNorm 4, Add 1, Silu 4, SwiGlu 5, ...).

Stream timing: kernels on the compute stream start GAP_US (1.0 µs) + U(0, GAP_JITTER_US=0.5) after
the previous one ends, and never earlier than 2 µs after their host launch (host launches run
ahead: HOST_OP_US = 4 µs per op on the host thread, the first launch LAUNCH_LEAD_US = 30 µs before
the first kernel of a step, so in practice the device never waits for the host within a step);
steps are separated by STEP_GAP_US = 200 µs of host work (sampling, input preparation).

HCCL all-reduce (tensor parallel, `comm` option): dur = HCCL_LATENCY_US (20) +
2*(tp-1)/tp * bytes / HCCS_GBPS (56 GB/s), tp = 2; the compute stream waits for it.

Prefetch (CMO) tasks of an "optimized" profile: dur = prefetched bytes / CMO_GBPS (285 GB/s,
REFERENCE.md §5) + LAUNCH_OVERHEAD_US.

PipeUtilization counters (consistent with the formula; ratios are shares of aicore_time, as the
real files are: aic_mac_time = aic_mac_ratio * aicore_time):
    aicore_time   = dur - KERNEL_HEAD_US (1.5 µs of head/tail outside the cores)
    total_cycles  = aicore_time * MHz * block_dim
    cube ops:   aic_mac_ratio  = (t_compute/EFF_COMPUTE) / aicore_time (capped at 0.99)
                aic_mte2_ratio = (t_memory /EFF_MEMORY)  / aicore_time (capped at 0.99)
                aic_mte1_ratio = min(0.95, 1.5 * aic_mac_ratio); aic_scalar_ratio = 0.15;
                aic_fixpipe_ratio = (output bytes / BW / EFF_MEMORY) / aicore_time;
                cube_utilization(%) = 100 * aicore_time/dur * block_dim/cube_cores
    vector ops: aiv_vec_ratio  = (t_compute/EFF_COMPUTE) / aiv_time
                aiv_mte2_ratio = (read bytes /BW/EFF_MEMORY) / aiv_time
                aiv_mte3_ratio = (write bytes/BW/EFF_MEMORY) / aiv_time; aiv_scalar_ratio = 0.2
    every ratio gets the same kernel's jitter factor (1 + U(-0.02, 0.02)), capped at 0.99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EFF_COMPUTE = 0.6
EFF_MEMORY = 0.7
LAUNCH_OVERHEAD_US = 3.0
JITTER = 0.02
WARMUP_FACTOR = 1.25
KERNEL_HEAD_US = 1.5
VECTOR_OPS_PER_CYCLE = 128

GAP_US = 1.0
GAP_JITTER_US = 0.5
HOST_OP_US = 4.0
LAUNCH_LEAD_US = 30.0
STEP_GAP_US = 200.0

HCCL_LATENCY_US = 20.0
HCCS_GBPS = 56.0
TP = 2
CMO_GBPS = 285.0


@dataclass(frozen=True)
class Hardware:
    name: str
    cube_cores: int
    vector_cores: int
    mhz: int
    bf16_tflops: float
    hbm_tbps: float
    l2_bytes: int

    @property
    def peak_flops(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def vector_peak(self) -> float:
        return self.vector_cores * VECTOR_OPS_PER_CYCLE * self.mhz * 1e6

    @property
    def hbm_bps(self) -> float:
        return self.hbm_tbps * 1e12


HARDWARE = {
    "910B3": Hardware("910B3", 20, 40, 1800, 294.9, 1.6, 192 * 2**20),
    "910B4": Hardware("910B4", 20, 40, 1500, 245.8, 0.8, 96 * 2**20),
}


def hardware(name: str) -> Hardware:
    key = name.upper().replace("ASCEND", "")
    if key not in HARDWARE:
        raise KeyError(f"unknown hardware {name!r}; known: {', '.join(HARDWARE)}")
    return HARDWARE[key]


@dataclass(frozen=True)
class Cost:
    t_compute_us: float
    t_memory_us: float
    base_us: float          # the formula, before jitter / warm-up / prefetch effects


def cost(flops: float, nbytes: float, hw: Hardware, kind: str) -> Cost:
    """The formula. kind: cube (cube peak) or vector (vector peak)."""
    peak = hw.peak_flops if kind == "cube" else hw.vector_peak
    tc = flops / peak * 1e6
    tm = nbytes / hw.hbm_bps * 1e6
    return Cost(tc, tm, max(tc / EFF_COMPUTE, tm / EFF_MEMORY) + LAUNCH_OVERHEAD_US)


def matmul_duration_us(m: int, k: int, n: int, hw: Hardware, dtype_bytes: int = 2,
                       bias: bool = False) -> float:
    """The formula for y[m,n] = x[m,k] @ W[n,k]^T (what a test recomputes from CSV shapes)."""
    nbytes = (m * k + n * k + m * n + (n if bias else 0)) * dtype_bytes
    return cost(2.0 * m * k * n, nbytes, hw, "cube").base_us


def hccl_duration_us(nbytes: int) -> float:
    return HCCL_LATENCY_US + 2 * (TP - 1) / TP * nbytes / (HCCS_GBPS * 1e9) * 1e6


def cmo_duration_us(nbytes: int) -> float:
    return nbytes / (CMO_GBPS * 1e9) * 1e6 + LAUNCH_OVERHEAD_US


def block_dim(kind: str, core: str, elems: int, hw: Hardware) -> int:
    """Cores a kernel uses: cube ops all cube cores (the tiling splits N); vector ops one core per
    2048 elements moved (bytes / 2), up to all vector cores."""
    if core in ("AI_CORE", "MIX_AIC"):
        return hw.cube_cores
    return max(1, min(hw.vector_cores, math.ceil(elems / 2048)))


def _r(x: float) -> float:
    return round(x, 3)


def counters(kind: str, c: Cost, dur_us: float, blocks: int, hw: Hardware, out_bytes: int,
             write_bytes: int, read_bytes: int, factor: float, mem_scale: float = 1.0) -> dict[str, float | int]:
    """PipeUtilization counter values for one kernel (names as in kernel_details.csv).

    mem_scale < 1 models a prefetched weight: part of the HBM traffic was served from L2.
    """
    busy = max(dur_us - KERNEL_HEAD_US, 0.5 * dur_us)
    cyc = int(round(busy * hw.mhz * blocks))

    def ratio(t: float) -> float:
        return min(0.99, t / busy * factor)

    v: dict[str, float | int] = {}
    if kind == "cube":
        mac = ratio(c.t_compute_us / EFF_COMPUTE)
        mte2 = ratio(c.t_memory_us * mem_scale / EFF_MEMORY)
        mte1 = min(0.95, 1.5 * mac)
        fix = ratio(out_bytes / hw.hbm_bps * 1e6 / EFF_MEMORY)
        v.update({"aicore_time(us)": _r(busy), "aic_total_cycles": cyc,
                  "aic_mac_time(us)": _r(mac * busy), "aic_mac_ratio": _r(mac),
                  "aic_scalar_time(us)": _r(0.15 * busy), "aic_scalar_ratio": 0.15,
                  "aic_mte1_time(us)": _r(mte1 * busy), "aic_mte1_ratio": _r(mte1),
                  "aic_mte2_time(us)": _r(mte2 * busy), "aic_mte2_ratio": _r(mte2),
                  "aic_fixpipe_time(us)": _r(fix * busy), "aic_fixpipe_ratio": _r(fix),
                  "aic_icache_miss_rate": 0.002,
                  "aiv_time(us)": 0.0, "aiv_total_cycles": 0, "aiv_vec_time(us)": 0.0,
                  "aiv_vec_ratio": 0.0, "aiv_scalar_time(us)": 0.0, "aiv_scalar_ratio": 0.0,
                  "aiv_mte2_time(us)": 0.0, "aiv_mte2_ratio": 0.0, "aiv_mte3_time(us)": 0.0,
                  "aiv_mte3_ratio": 0.0, "aiv_icache_miss_rate": 0.0,
                  "cube_utilization(%)": _r(100.0 * busy / dur_us * min(1.0, blocks / hw.cube_cores))})
    else:
        vec = ratio(c.t_compute_us / EFF_COMPUTE)
        mte2 = ratio(read_bytes / hw.hbm_bps * 1e6 / EFF_MEMORY)
        mte3 = ratio(write_bytes / hw.hbm_bps * 1e6 / EFF_MEMORY)
        v.update({"aicore_time(us)": 0.0, "aic_total_cycles": 0, "aic_mac_time(us)": 0.0,
                  "aic_mac_ratio": 0.0, "aic_scalar_time(us)": 0.0, "aic_scalar_ratio": 0.0,
                  "aic_mte1_time(us)": 0.0, "aic_mte1_ratio": 0.0, "aic_mte2_time(us)": 0.0,
                  "aic_mte2_ratio": 0.0, "aic_fixpipe_time(us)": 0.0, "aic_fixpipe_ratio": 0.0,
                  "aic_icache_miss_rate": 0.0,
                  "aiv_time(us)": _r(busy), "aiv_total_cycles": cyc,
                  "aiv_vec_time(us)": _r(vec * busy), "aiv_vec_ratio": _r(vec),
                  "aiv_scalar_time(us)": _r(0.2 * busy), "aiv_scalar_ratio": 0.2,
                  "aiv_mte2_time(us)": _r(mte2 * busy), "aiv_mte2_ratio": _r(mte2),
                  "aiv_mte3_time(us)": _r(mte3 * busy), "aiv_mte3_ratio": _r(mte3),
                  "aiv_icache_miss_rate": 0.001, "cube_utilization(%)": 0})
    return v
