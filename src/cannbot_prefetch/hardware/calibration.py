"""`hardware calibrate`: measure this host's matmul rate and memory bandwidth (a few seconds).

Writes a `cpu` profile labelled `measured: true` so CPU PyTorch traces can be analysed with
`--hardware cpu`. Uses torch when importable (fp32 and bf16), else numpy (fp32), else fails with
an install hint. The numbers are best-of-N over short runs: an estimate of what this host reaches,
not a vendor peak, and the sources say so.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from ..errors import InputError

MATMUL_N = 1024                 # square fp32 GEMM: 2 GFLOP, big enough to reach the BLAS rate
COPY_BYTES = 128 * 1024 * 1024  # per buffer: larger than any last-level cache


def _best_rate(fn: Callable[[], Any], work: float, budget_s: float, min_reps: int = 2) -> float:
    """Run `fn` repeatedly within `budget_s` (at least `min_reps` times); best `work` per second."""
    best = 0.0
    deadline = time.perf_counter() + budget_s
    reps = 0
    while reps < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, work / dt)
        reps += 1
        if reps >= 200:
            break
    return best


def _matmul_rate(make: Callable[[int], Callable[[], Any]], budget_s: float) -> tuple[float, int]:
    """Best FLOP/s of an n x n GEMM; n doubles from 128 while one run stays short (slow dtypes,
    e.g. bf16 without hardware support, stay small so the whole thing fits the budget)."""
    n = 128
    while True:
        run = make(n)
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        if n >= MATMUL_N or dt > budget_s / 20:
            break
        n *= 2
    reps = 1 if dt > budget_s / 2 else 2
    return _best_rate(run, 2.0 * n ** 3, max(0.0, budget_s - dt), min_reps=reps), n


def _torch_backend(budget_s: float) -> tuple[dict[str, float], float, str, str]:
    import torch  # noqa: PLC0415 (optional dependency)

    peaks: dict[str, float] = {}
    sizes = []
    for key, dtype, share in (("fp32", torch.float32, 0.4), ("bf16", torch.bfloat16, 0.25)):
        def make(n: int, dtype=dtype) -> Callable[[], Any]:
            a = torch.randn(n, n, dtype=dtype)
            b = torch.randn(n, n, dtype=dtype)
            return lambda: torch.mm(a, b)
        rate, n = _matmul_rate(make, budget_s * share)
        peaks[key] = rate / 1e12
        sizes.append(f"{key} {n}x{n}")
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    bw = _best_rate(lambda: dst.copy_(src), 2.0 * COPY_BYTES, budget_s * 0.35, min_reps=3) / 1e12
    tag = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    mm = f"{tag}: best of repeated torch.mm ({', '.join(sizes)})"
    copy = f"{tag}: best of repeated copies of a {COPY_BYTES >> 20} MiB tensor, counted as read + write"
    return peaks, bw, mm, copy


def _numpy_backend(budget_s: float) -> tuple[dict[str, float], float, str, str]:
    import numpy as np  # noqa: PLC0415 (optional dependency)

    rng = np.random.default_rng(0)

    def make(n: int) -> Callable[[], Any]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b)
    rate, n = _matmul_rate(make, budget_s * 0.6)
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    bw = _best_rate(lambda: np.copyto(dst, src), 2.0 * COPY_BYTES, budget_s * 0.4, min_reps=3) / 1e12
    mm = f"numpy {np.__version__}: best of repeated float32 np.matmul ({n}x{n})"
    copy = f"numpy {np.__version__}: best of repeated copies of a {COPY_BYTES >> 20} MiB array, counted as read + write"
    return {"fp32": rate / 1e12}, bw, mm, copy


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
                 method: str = "auto"):
    """Measure, write the YAML (returns the profile read back from it)."""
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
    peaks, bw, mm_how, copy_how = (_torch_backend if use == "torch" else _numpy_backend)(budget)
    if bw <= 0 or not peaks or any(v <= 0 for v in peaks.values()):
        raise InputError("calibration measured no usable rate (timer resolution?)", hint="rerun it")

    host = socket.gethostname()
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stamp = f"measured on this host {host} {when} with"
    llc, llc_where = _last_level_cache()
    ram = _host_memory()
    cores = os.cpu_count()
    mhz = _cpu_mhz()
    sources: dict[str, Any] = {f"peaks_tflops.{k}": f"{stamp} {mm_how}" for k in peaks}
    sources.update({
        "hbm_bw_tbps": f"{stamp} {copy_how} (host DRAM, not HBM)",
        "cube_cores": "os.cpu_count() on this host (logical CPUs; no cube cores)",
        "vector_cores": "os.cpu_count() on this host (logical CPUs)",
        "freq_mhz": "/proc/cpuinfo 'cpu MHz' of the first CPU at calibration time" if mhz else "not available",
        "l2_bytes": (f"{llc_where}: the last-level cache stands in for the NPU's L2" if llc
                     else "not available on this host"),
        "hbm_bytes": "physical memory (sysconf) of this host" if ram else "not available",
        "cmo_bw_gbps": "not applicable on a CPU: policy.yaml sizing.cmo_bw_gbps placeholder (REFERENCE.md §5)",
    })
    from ..settings import policy
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
        "cmo_bw_gbps": float(policy().get("sizing", {}).get("cmo_bw_gbps", 285)),
        "sources": sources,
    }
    target = _target(out_path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        text = ("# cpu: measured by `cannbot prefetch hardware calibrate` (not a vendor number).\n"
                + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100))
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the calibrated profile: {exc.strerror}", path=str(target)) from None
    return from_dict(doc, str(target))
