"""One hardware part's numbers (`HardwareProfile`) and the peak keys dtypes map to.

Separate from profiles.py (which finds, loads and chooses the parts) because the roofline,
sizing and report stages use a part's numbers and its peak for a dtype, never the lookup.

Units: peaks in TFLOPS (TOPS for integer types), HBM bandwidth in TB/s, CMO bandwidth in GB/s,
sizes in bytes. `peak_flops()` / `hbm_bw_bytes_per_s` give SI base units for the formulas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InputError

# Kernel-table / torch dtype spellings -> peak key. The table strips DT_ already.
_PEAK_KEYS: dict[str, str] = {
    "float": "fp32", "float32": "fp32", "fp32": "fp32",
    "float16": "fp16", "fp16": "fp16", "half": "fp16", "c10::half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16", "c10::bfloat16": "bf16",
    "hf32": "fp32", "tf32": "tf32",
    "int8": "int8", "uint8": "int8", "signed char": "int8", "unsigned char": "int8",
    "int4": "int4", "float4_e2m1": "fp4", "float4_e1m2": "fp4",
    "hifloat8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "fp8": "fp8",
}
# When a part has no peak for a key: what to use instead (and say so).
_PEAK_FALLBACK: dict[str, str] = {"int4": "int8", "fp8": "fp16", "fp4": "fp16", "tf32": "fp32",
                                  "fp32": "fp16", "int8": "fp16"}

def peak_key(dtype: str | None) -> str:
    """Canonical peak key for a dtype spelling ('BF16', 'DT_FLOAT', 'c10::Half' -> bf16/fp32/fp16)."""
    if not dtype:
        return "fp16"
    text = dtype.strip().lower()
    for prefix in ("dt_", "torch."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return _PEAK_KEYS.get(text, text)


@dataclass(frozen=True)
class HardwareProfile:
    """One part's numbers. Frozen; `with_overrides` returns a new profile that records the change."""

    name: str
    aliases: tuple[str, ...]
    cube_cores: int | None
    vector_cores: int | None
    freq_mhz: float | None
    peaks_tflops: dict[str, float]
    hbm_bw_tbps: float
    l2_bytes: int | None
    hbm_bytes: int | None
    cmo_bw_gbps: float
    sources: dict[str, str]
    measured: bool = False
    detected_from: str = "shipped profile"
    overrides: dict[str, float] = field(default_factory=dict)
    vendor: str = ""
    hbm_bw_ini_tbps: float | None = None
    path: str = ""                      # the YAML it came from

    # --- numbers for the formulas ---------------------------------------------------------
    @property
    def hbm_bw_bytes_per_s(self) -> float:
        return self.hbm_bw_tbps * 1e12

    def peak_basis(self, dtype: str | None) -> tuple[str, str | None]:
        """(peak key used, note when it is a stand-in for a key this part lacks)."""
        key = peak_key(dtype)
        seen = key
        while key not in self.peaks_tflops and key in _PEAK_FALLBACK:
            key = _PEAK_FALLBACK[key]
        if key not in self.peaks_tflops:
            key = "fp16" if "fp16" in self.peaks_tflops else next(iter(self.peaks_tflops))
        note = None if key == seen else f"{self.name} has no {seen} peak; the {key} peak is used"
        return key, note

    def peak_for(self, dtype: str | None) -> float:
        """Peak in TFLOPS (TOPS) for a dtype spelling; falls back per `peak_basis`."""
        return self.peaks_tflops[self.peak_basis(dtype)[0]]

    def peak_flops(self, dtype: str | None) -> float:
        """Peak in FLOP/s."""
        return self.peak_for(dtype) * 1e12

    def ridge(self, dtype: str | None) -> float:
        """Ridge point in FLOP/byte: peak / HBM bandwidth."""
        return self.peak_flops(dtype) / self.hbm_bw_bytes_per_s

    # --- overrides --------------------------------------------------------------------------
    def with_overrides(self, hbm_bw_tbps: float | None = None, peaks: dict[str, float] | None = None,
                       cmo_bw_gbps: float | None = None) -> "HardwareProfile":
        """A copy with user-given numbers; each change is recorded in `overrides` and `sources`."""
        overrides = dict(self.overrides)
        sources = dict(self.sources)
        changes: dict[str, Any] = {}
        if hbm_bw_tbps is not None:
            _positive("--hbm-bw", hbm_bw_tbps)
            sources["hbm_bw_tbps"] = (f"user override (--hbm-bw {hbm_bw_tbps:g}); the profile said "
                                      f"{self.hbm_bw_tbps:g} TB/s")
            overrides["hbm_bw_tbps"] = float(hbm_bw_tbps)
            changes["hbm_bw_tbps"] = float(hbm_bw_tbps)
        if peaks:
            new_peaks = dict(self.peaks_tflops)
            for dtype, value in peaks.items():
                _positive(f"--peak-tflops {dtype}", value)
                key = peak_key(dtype)
                old = self.peaks_tflops.get(key)
                was = f"the profile said {old:g}" if old is not None else "the profile had none"
                sources[f"peaks_tflops.{key}"] = f"user override (--peak-tflops {key}={value:g}); {was}"
                overrides[f"peaks_tflops.{key}"] = float(value)
                new_peaks[key] = float(value)
            changes["peaks_tflops"] = new_peaks
        if cmo_bw_gbps is not None:
            _positive("--cmo-bw", cmo_bw_gbps)
            sources["cmo_bw_gbps"] = (f"user override (--cmo-bw {cmo_bw_gbps:g}); the profile said "
                                      f"{self.cmo_bw_gbps:g} GB/s")
            overrides["cmo_bw_gbps"] = float(cmo_bw_gbps)
            changes["cmo_bw_gbps"] = float(cmo_bw_gbps)
        if not changes:
            return self
        return replace(self, overrides=overrides, sources=sources, **changes)

    # --- output ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """CONTRACTS.md `hardware{name, detected_from, peaks, hbm_bw, l2_bytes, overrides, sources}`.

        `peaks` in TFLOPS (TOPS), `hbm_bw` in TB/s, `cmo_bw` in GB/s (the `units` key says so).
        """
        return {
            "name": self.name,
            "detected_from": self.detected_from,
            "peaks": dict(self.peaks_tflops),
            "hbm_bw": self.hbm_bw_tbps,
            "l2_bytes": self.l2_bytes,
            "overrides": dict(self.overrides),
            "sources": dict(self.sources),
            "cmo_bw": self.cmo_bw_gbps,
            "measured": self.measured,
            "units": {"peaks": "TFLOPS", "hbm_bw": "TB/s", "cmo_bw": "GB/s", "l2_bytes": "bytes"},
        }

    def to_yaml_dict(self) -> dict[str, Any]:
        """The on-disk form (configs/hardware/*.yaml)."""
        return {
            "name": self.name, "aliases": list(self.aliases), "vendor": self.vendor,
            "measured": self.measured, "cube_cores": self.cube_cores,
            "vector_cores": self.vector_cores, "freq_mhz": self.freq_mhz,
            "peaks_tflops": dict(self.peaks_tflops), "hbm_bw_tbps": self.hbm_bw_tbps,
            "hbm_bw_ini_tbps": self.hbm_bw_ini_tbps, "l2_bytes": self.l2_bytes,
            "hbm_bytes": self.hbm_bytes, "cmo_bw_gbps": self.cmo_bw_gbps,
            "sources": dict(self.sources),
        }

    def matches(self, name: str) -> bool:
        key = norm_name(name)
        return key == norm_name(self.name) or any(key == norm_name(a) for a in self.aliases)


def _positive(what: str, value: float) -> None:
    try:
        ok = float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{what} must be a positive number, not {value!r}")


def norm_name(name: str) -> str:
    """Case-insensitive, and blind to spaces / dashes / underscores ('ascend910_9392' = 'Ascend910-9392')."""
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def parse_peak_overrides(items: list[str] | tuple[str, ...] | None) -> dict[str, float]:
    """`--peak-tflops DTYPE=V` values -> {peak key: TFLOPS}; a malformed item is an InputError."""
    out: dict[str, float] = {}
    for item in items or ():
        dtype, sep, value = str(item).partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or not dtype.strip() or not number > 0:
            raise InputError(f"--peak-tflops expects DTYPE=TFLOPS with a positive number, not {item!r}",
                             hint="e.g. --peak-tflops bf16=280")
        out[peak_key(dtype.strip())] = number
    return out
