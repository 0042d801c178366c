"""`hardware calibrate`: measure this host's matmul rate and memory bandwidth (a few seconds).

Writes a `cpu` profile labelled `measured: true` so CPU PyTorch traces can be analysed with
`--hardware cpu`. Uses torch when importable (fp32 and bf16), else numpy (fp32), else fails with
an install hint. The numbers are best-of-N over GEMMs of at least 512x512 and a copy larger than
any cache: an estimate of what this host reaches, not a vendor peak, and the sources say so (and
say when the host was busy). Numbers no real host gives are refused, not written.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import yaml_safe

from ..errors import InputError
from ..policy import Policy

COPY_BYTES = 128 * 1024 * 1024  # per buffer: larger than any last-level cache


@dataclass(frozen=True)
class Rate:
    """Best-of-N rate of one kernel, with the spread that says whether the host was busy."""

    best: float            # work per second of the fastest run
    median: float          # work per second of the median run
    runs: int
    size: str              # what was timed, e.g. "fp32 1024x1024"

    def busy(self, spread: float) -> bool:
        """The median run was more than `spread` times slower than the best (policy
        calibration.busy_spread): other work shared the cores."""
        return self.median > 0 and self.best / self.median > spread


def _rate(fn: Callable[[], Any], work: float, budget_s: float, min_reps: int, size: str,
          clock: Callable[[], float] = time.perf_counter) -> Rate:
    """Run `fn` at least `min_reps` times and until `budget_s` is spent (at most 200 runs).

    Preemption on a busy host only ever makes a run slower, so the fastest run is the estimate
    of what the host reaches; the median is kept to tell a busy host from a quiet one."""
    rates: list[float] = []
    deadline = clock() + budget_s
    while len(rates) < min_reps or (clock() < deadline and len(rates) < 200):
        t0 = clock()
        fn()
        dt = clock() - t0
        if dt > 0:
            rates.append(work / dt)
        elif len(rates) > 10 * min_reps:
            break                      # a clock that never advances: give up, the check below says so
    rates.sort()
    if not rates:
        return Rate(0.0, 0.0, 0, size)
    return Rate(rates[-1], rates[len(rates) // 2], len(rates), size)


def _matmul_rate(make: Callable[[int], Callable[[], Any]], budget_s: float, label: str,
                 lim: Mapping[str, Any], clock: Callable[[], float] = time.perf_counter) -> Rate:
    """FLOP/s of an n x n GEMM. n starts at `matmul_min_n` (small GEMMs measure call overhead,
    not the multiplier) and doubles up to `matmul_max_n` while one run stays under a twentieth of
    the budget; then best-of-N (at least 3 runs) over the rest of the budget."""
    n = int(lim["matmul_min_n"])
    while True:
        run = make(n)
        run()                          # first call: allocation and dispatch warm-up, not timed
        t0 = clock()
        run()
        dt = clock() - t0
        if n >= int(lim["matmul_max_n"]) or dt > budget_s / 20:
            break
        n *= 2
    return _rate(run, 2.0 * n ** 3, max(0.0, budget_s - dt), 3, f"{label} {n}x{n}", clock)


def _torch_backend(budget_s: float, lim: Mapping[str, Any]) -> tuple[dict[str, Rate], Rate, str, str]:
    import torch  # noqa: PLC0415 (optional dependency)

    peaks: dict[str, Rate] = {}
    for key, dtype, share in (("fp32", torch.float32, 0.4), ("bf16", torch.bfloat16, 0.25)):
        def make(n: int, dtype=dtype) -> Callable[[], Any]:
            a = torch.randn(n, n, dtype=dtype)
            b = torch.randn(n, n, dtype=dtype)
            return lambda: torch.mm(a, b)
        peaks[key] = _matmul_rate(make, budget_s * share, key, lim)
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    bw = _rate(lambda: dst.copy_(src), 2.0 * COPY_BYTES, budget_s * 0.35, 3,
               f"{COPY_BYTES >> 20} MiB copy")
    tag = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    return peaks, bw, f"{tag}: repeated torch.mm", f"{tag}: repeated tensor copies"


def _numpy_backend(budget_s: float, lim: Mapping[str, Any]) -> tuple[dict[str, Rate], Rate, str, str]:
    import numpy as np  # noqa: PLC0415 (optional dependency)

    rng = np.random.default_rng(0)

    def make(n: int) -> Callable[[], Any]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b)
    rate = _matmul_rate(make, budget_s * 0.6, "fp32", lim)
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    bw = _rate(lambda: np.copyto(dst, src), 2.0 * COPY_BYTES, budget_s * 0.4, 3,
               f"{COPY_BYTES >> 20} MiB copy")
    tag = f"numpy {np.__version__}"
    return {"fp32": rate}, bw, f"{tag}: repeated np.matmul", f"{tag}: repeated array copies"


def _how(r: Rate, spread: float) -> str:
    busy = (f"; the host was busy (median run {r.best / r.median:.1f}x slower than the best): "
            "rerun on a quiet machine for a steadier number") if r.busy(spread) else ""
    return f"best of {r.runs} runs of {r.size}{busy}"


def _check_plausible(rates: dict[str, Rate], copy: Rate, lim: Mapping[str, Any]) -> None:
    """Refuse numbers no real host gives (policy.yaml `calibration.plausible_*`): a GEMM rate of
    0.15 GFLOPS or a zero copy rate is the machine's load or the timer speaking, not the host,
    and a ridge built on it would make every op look compute- or latency-bound."""
    lo, hi = lim["plausible_tflops"]
    spread = lim["busy_spread"]
    hint = ("rerun `cannbot prefetch hardware calibrate` on a quieter machine (or with more "
            "--seconds), or pass a profile you trust with --hardware NAME|FILE.yaml")
    for key, r in rates.items():
        tflops = r.best / 1e12
        if not lo <= tflops <= hi:
            raise InputError(f"calibration measured a {key} GEMM at {tflops:.3g} TFLOPS ({_how(r, spread)}), "
                             f"outside the plausible {lo:g}-{hi:g} TFLOPS: not written", hint=hint)
    lo, hi = lim["plausible_bw_tbps"]
    if not lo <= copy.best / 1e12 <= hi:
        raise InputError(f"calibration measured memory bandwidth {copy.best / 1e12:.3g} TB/s "
                         f"({_how(copy, spread)}), outside the plausible {lo:g}-{hi:g} TB/s: not written",
                         hint=hint)


def _native_only(rates: dict[str, Rate]) -> tuple[dict[str, Rate], dict[str, str]]:
    """Drop a half-precision rate slower than fp32: this CPU has no native GEMM for it (no
    AVX512-BF16 / AMX), so such ops run through a conversion path that no peak describes, and a
    roofline built on it calls decode GEMMs "faster than the compute roof". The source says why
    and what to do: profile in float32 on this host."""
    fp32 = rates.get("fp32")
    kept, why = dict(rates), {}
    for key in ("bf16", "fp16"):
        r = rates.get(key)
        if fp32 is not None and r is not None and r.best < fp32.best:
            del kept[key]
            why[f"peaks_tflops.{key}"] = (
                f"not written: {key} GEMMs ran at {r.best / 1e12:.3g} TFLOPS, slower than fp32 "
                f"({fp32.best / 1e12:.3g}): this CPU has no native {key} GEMM, so {key} ops take a "
                f"conversion path no peak describes. Profile the model in float32 on this host "
                f"(a {key} op is then costed at the fp32 peak, and says so)")
    return kept, why


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001 (a broken install is as good as absent here)
        return False


def _last_level_cache() -> tuple[int | None, str]:
    best, where = None, ""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")) if base.is_dir() else []:
        try:
            text = (idx / "size").read_text().strip().upper()
            level = (idx / "level").read_text().strip()
        except OSError:
            continue
        mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        if not digits.isdigit():
            continue
        size = int(digits) * mult
        if best is None or size > best:
            best, where = size, f"L{level} cache size read from {idx}/size (per cache instance)"
    return best, where


def _host_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_mhz() -> float | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("cpu mhz"):
                return round(float(line.split(":", 1)[1]), 1)
    except (OSError, ValueError):
        pass
    return None


def _target(out_path: str | Path | None) -> Path:
    from .profiles import user_dir
    if out_path is None:
        return user_dir() / "cpu.yaml"
    path = Path(out_path).expanduser()
    if path.suffix.lower() in (".yaml", ".yml"):
        return path
    return path / "cpu.yaml"


def measure_host(out_path: str | Path | None = None, *, seconds: float = 3.0,
                 method: str = "auto", policy: Policy | None = None):
    """Measure, write the YAML (returns the profile read back from it). `policy`: the
    command's (calibration bounds, the CMO placeholder); None: the shipped one."""
    pol = policy or Policy.load()
    lim = pol["calibration"]
    spread = lim["busy_spread"]
    from .profiles import from_dict

    if method not in ("auto", "torch", "numpy"):
        raise InputError(f"unknown calibration method {method!r}; use auto, torch or numpy")
    use = method
    if method == "auto":
        use = "torch" if _importable("torch") else "numpy" if _importable("numpy") else ""
    elif not _importable(method):
        use = ""
    if not use:
        raise InputError("calibration needs torch or numpy to time a matmul, and neither is importable",
                         hint="pip install 'cannbot-prefetch[torch]'")
    budget = max(0.2, min(float(seconds), 8.0))
    rates, copy, mm_how, copy_how = (_torch_backend if use == "torch" else _numpy_backend)(budget, lim)
    rates, not_native = _native_only(rates)
    _check_plausible(rates, copy, lim)
    peaks = {k: r.best / 1e12 for k, r in rates.items()}
    bw = copy.best / 1e12

    host = socket.gethostname()
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stamp = f"measured on this host {host} {when} with"
    llc, llc_where = _last_level_cache()
    ram = _host_memory()
    cores = os.cpu_count()
    mhz = _cpu_mhz()
    sources: dict[str, Any] = {f"peaks_tflops.{k}": f"{stamp} {mm_how}, {_how(r, spread)}"
                               for k, r in rates.items()}
    sources.update(not_native)
    sources.update({
        "hbm_bw_tbps": f"{stamp} {copy_how}, {_how(copy, spread)}, counted as read + write (host DRAM, not HBM)",
        "cube_cores": "os.cpu_count() on this host (logical CPUs; no cube cores)",
        "vector_cores": "os.cpu_count() on this host (logical CPUs)",
        "freq_mhz": "/proc/cpuinfo 'cpu MHz' of the first CPU at calibration time" if mhz else "not available",
        "l2_bytes": (f"{llc_where}: the last-level cache stands in for the NPU's L2" if llc
                     else "not available on this host"),
        "hbm_bytes": "physical memory (sysconf) of this host" if ram else "not available",
        "cmo_bw_gbps": "not applicable on a CPU: policy.yaml sizing.cmo_bw_gbps placeholder (docs/sources.md, CMO rate)",
    })
    doc = {
        "name": "cpu",
        "aliases": ["cpu", "host"],
        "vendor": platform.processor() or platform.machine() or "cpu",
        "measured": True,
        "cube_cores": cores, "vector_cores": cores, "freq_mhz": mhz,
        "peaks_tflops": {k: float(f"{v:.6g}") for k, v in peaks.items()},
        "hbm_bw_tbps": float(f"{bw:.6g}"),
        "hbm_bw_ini_tbps": None,
        "l2_bytes": llc, "hbm_bytes": ram,
        "cmo_bw_gbps": float(pol["sizing"]["cmo_bw_gbps"]),
        "sources": sources,
    }
    target = _target(out_path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        text = ("# cpu: measured by `cannbot prefetch hardware calibrate` (not a vendor number).\n"
                + yaml_safe.dump(doc, sort_keys=False, allow_unicode=True, width=100))
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the calibrated profile: {exc.strerror}", path=str(target)) from None
    return from_dict(doc, str(target), policy=pol)
