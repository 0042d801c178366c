"""Hardware profiles: peaks, bandwidth and cache sizes of one part, every number with its source.

Side input of the roofline stage. Shipped profiles live in `configs/hardware/*.yaml` (one part per
file); user-calibrated ones in `$CANNBOT_HARDWARE_DIR` or `~/.config/cannbot-prefetch/hardware/`
(a user profile with the same name as a shipped one replaces it).

Units: peaks in TFLOPS (TOPS for integer types), HBM bandwidth in TB/s, CMO bandwidth in GB/s,
sizes in bytes. `peak_flops()` / `hbm_bw_bytes_per_s` give SI base units for the formulas.

    hw = resolve(None, profile.info)          # detect from the profile, else 910B3 (assumed)
    hw = hw.with_overrides(hbm_bw_tbps=1.2)   # recorded in hw.overrides and hw.sources
    hw.ridge("BF16")                          # FLOP per byte
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import InputError
from ..settings import configs_dir, load_yaml

if TYPE_CHECKING:  # pragma: no cover
    from ..profiling.table import ProfileInfo

DEFAULT_PART = "910B3"
USER_DIR_ENV = "CANNBOT_HARDWARE_DIR"

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

_NUMERIC_FIELDS = ("cube_cores", "vector_cores", "freq_mhz", "hbm_bw_tbps", "l2_bytes",
                   "hbm_bytes", "cmo_bw_gbps")


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
        key = _norm(name)
        return key == _norm(self.name) or any(key == _norm(a) for a in self.aliases)


def _positive(what: str, value: float) -> None:
    try:
        ok = float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{what} must be a positive number, not {value!r}")


def _norm(name: str) -> str:
    """Case-insensitive, and blind to spaces / dashes / underscores ('ascend910_9392' = 'Ascend910-9392')."""
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


# --- loading ------------------------------------------------------------------------------------
def from_dict(data: Any, path: str = "") -> HardwareProfile:
    """Build a profile from one YAML document; names the file and the field when it is wrong."""
    if not isinstance(data, dict):
        raise InputError("hardware profile is not a mapping", path=path)
    try:
        name = str(data["name"])
        peaks = {str(k).lower(): float(v) for k, v in dict(data["peaks_tflops"]).items() if v is not None}
        bw = float(data["hbm_bw_tbps"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"hardware profile lacks a valid {exc}", path=path,
                         hint="needs name, peaks_tflops and hbm_bw_tbps") from None
    if not peaks or bw <= 0 or any(v <= 0 for v in peaks.values()):
        raise InputError("hardware profile needs positive peaks_tflops and hbm_bw_tbps", path=path)
    nums: dict[str, Any] = {}
    for key in _NUMERIC_FIELDS:
        value = data.get(key)
        if value is None:
            nums[key] = None
            continue
        try:
            nums[key] = int(value) if key in ("cube_cores", "vector_cores", "l2_bytes", "hbm_bytes") else float(value)
        except (TypeError, ValueError):
            raise InputError(f"hardware profile field {key} is not a number: {value!r}", path=path) from None
    cmo = nums.pop("cmo_bw_gbps")
    if cmo is None:
        from ..settings import policy
        cmo = float(policy().get("sizing", {}).get("cmo_bw_gbps", 285))
    nums.pop("hbm_bw_tbps")
    aliases = tuple(str(a) for a in (data.get("aliases") or []))
    if name not in aliases:
        aliases = (name,) + aliases
    sources = {str(k): str(v) for k, v in dict(data.get("sources") or {}).items()}
    ini = data.get("hbm_bw_ini_tbps")
    return HardwareProfile(
        name=name, aliases=aliases, peaks_tflops=peaks, hbm_bw_tbps=bw, cmo_bw_gbps=float(cmo),
        sources=sources, measured=bool(data.get("measured", False)),
        detected_from="measured on this host" if data.get("measured") else "shipped profile",
        vendor=str(data.get("vendor") or ""), hbm_bw_ini_tbps=float(ini) if ini is not None else None,
        path=path, **nums)


def user_dir() -> Path:
    """Where calibrated profiles go: $CANNBOT_HARDWARE_DIR, else ~/.config/cannbot-prefetch/hardware."""
    env = os.environ.get(USER_DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cannbot-prefetch" / "hardware"


def _read_yaml(path: Path) -> Any:
    """settings.load_yaml's errors, with libyaml's loader when present (10 files per lookup)."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return load_yaml(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=loader)  # noqa: S506 (a safe loader)
    except (OSError, yaml.YAMLError):
        return load_yaml(path)  # raises the InputError naming the file and line


def _load_dir(folder: Path) -> list[HardwareProfile]:
    if not folder.is_dir():
        return []
    return [from_dict(_read_yaml(p), str(p)) for p in sorted(folder.glob("*.yaml"))]


def available() -> list[HardwareProfile]:
    """Shipped profiles, then user-calibrated ones; a user profile replaces a shipped one by name."""
    by_name: dict[str, HardwareProfile] = {}
    for prof in _load_dir(configs_dir() / "hardware"):
        by_name[_norm(prof.name)] = prof
    for prof in _load_dir(user_dir()):
        by_name[_norm(prof.name)] = prof
    return list(by_name.values())


def known_names(profiles: list[HardwareProfile] | None = None) -> list[str]:
    return [p.name for p in (profiles if profiles is not None else available())]


def _is_file_ref(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml")) or "/" in name or os.sep in name


def load(name: str) -> HardwareProfile:
    """A profile by name or alias (case-insensitive), or from a YAML file (`calibrate --out`
    writes one anywhere). Unknown -> InputError listing the known names."""
    if _is_file_ref(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise InputError("hardware profile file not found", path=str(path),
                             hint="give a part name (`cannbot prefetch hardware list`) or a YAML file")
        return from_dict(_read_yaml(path), str(path))
    profiles = available()
    for prof in profiles:
        if prof.matches(name):
            return prof
    hint = "run `cannbot prefetch hardware calibrate` first" if _norm(name) == "cpu" else \
        "see `cannbot prefetch hardware list`"
    raise InputError(f"unknown hardware {name!r}; known: {', '.join(known_names(profiles))}", hint=hint)


def _match_soc(soc: str, profiles: list[HardwareProfile]) -> HardwareProfile | None:
    for prof in profiles:
        if prof.matches(soc):
            return prof
    return None


def _match_cores(cores: int, mhz: float, profiles: list[HardwareProfile]) -> list[HardwareProfile]:
    """Profiles with this cube-core count and frequency (within policy
    `profiling.freq_match_share`), Ascend first, 910B before A3."""
    from ..settings import policy
    share = float(policy()["profiling"]["freq_match_share"])
    hits = [p for p in profiles if not p.measured and p.cube_cores == cores and p.freq_mhz
            and abs(p.freq_mhz - mhz) <= share * p.freq_mhz]
    return sorted(hits, key=lambda p: (p.vendor != "Huawei", p.name))


def resolve(name: str | None, info: "ProfileInfo | None" = None) -> HardwareProfile:
    """The part to use: explicit `name` wins; else the profile's SoC name; else its (cube cores,
    MHz); else 910B3, with `detected_from` saying it is an assumption (the caller warns)."""
    if name:
        prof = load(name)
        return replace(prof, detected_from=f"--hardware {name}")
    profiles = available()
    soc = getattr(info, "soc", None) if info is not None else None
    if soc:
        prof = _match_soc(soc, profiles)
        if prof is not None:
            return replace(prof, detected_from=f"profile SoC name {soc!r}")
    cores = getattr(info, "cube_cores", None) if info is not None else None
    mhz = getattr(info, "freq_mhz", None) if info is not None else None
    if cores and mhz:
        hits = _match_cores(int(cores), float(mhz), profiles)
        if hits:
            also = [p.name for p in hits[1:]]
            extra = f" (same numbers as {', '.join(also)})" if also else ""
            return replace(hits[0], detected_from=f"profile reports {cores} cube cores @ {mhz:g} MHz{extra}")
    prof = load(DEFAULT_PART)
    if info is None:   # manual mode: no profile to detect a part from
        return replace(prof, detected_from=f"default {DEFAULT_PART} (no profile to detect the part "
                                           "from); pass --hardware NAME to choose")
    said = []
    if soc:
        said.append(f"SoC {soc!r} unknown")
    if cores or mhz:
        said.append(f"{cores if cores else 'unknown'} cube cores @ "
                    f"{f'{mhz:g}' if mhz else 'unknown'} MHz match no part")
    why = "; ".join(said) if said else "the profile names no part"
    return replace(prof, detected_from=f"assumed {DEFAULT_PART} ({why}); pass --hardware NAME to choose")


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


def is_assumed(prof: HardwareProfile) -> bool:
    """True when `resolve` fell back to the default part (the caller prints a one-line warning)."""
    return prof.detected_from.startswith(("assumed ", "default "))


def calibrate(out_path: str | Path | None = None, *, seconds: float = 3.0,
              method: str = "auto") -> HardwareProfile:
    """Measure this host's matmul rate and memory bandwidth; write and return a `cpu` profile."""
    from .calibration import measure_host
    return measure_host(out_path, seconds=seconds, method=method)
