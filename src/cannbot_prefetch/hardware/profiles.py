"""Hardware profiles: the known parts (shipped and user YAML), loaded, and the one a profile ran on.

Side input of the roofline stage. Shipped profiles live in `configs/hardware/*.yaml` (one part per
file); user-calibrated ones in `$CANNBOT_HARDWARE_DIR` or `~/.config/cannbot-prefetch/hardware/`
(a user profile with the same name as a shipped one replaces it).

One part's numbers (peaks, bandwidth, cache sizes, each with its source) and their units are
part.py's `HardwareProfile`; this module reads them from YAML, lists the parts and chooses one.

    hw = resolve(None, profile.info)          # detect from the profile, else 910B3 (assumed)
    hw = hw.with_overrides(hbm_bw_tbps=1.2)   # recorded in hw.overrides and hw.sources
    hw.ridge("BF16")                          # FLOP per byte
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..i18n import said as _said
from ..policy import Policy
from ..settings import configs_dir, load_yaml
from .part import HardwareProfile, norm_name

if TYPE_CHECKING:  # pragma: no cover
    from ..profiling.table import ProfileInfo

DEFAULT_PART = "910B3"
A1_PART = "910A"        # an A1-class counter layout without a part name
USER_DIR_ENV = "CANNBOT_HARDWARE_DIR"

_NUMERIC_FIELDS = ("cube_cores", "vector_cores", "freq_mhz", "hbm_bw_tbps", "l2_bytes",
                   "hbm_bytes", "cmo_bw_gbps")



# --- loading ------------------------------------------------------------------------------------
def from_dict(data: Any, path: str = "", *, policy: Policy | None = None) -> HardwareProfile:
    """Build a profile from one YAML document; names the file and the field when it is wrong.
    `policy`: the run's, read (else the shipped one) only for a file without cmo_bw_gbps."""
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
        cmo = float((policy or Policy.load())["sizing"]["cmo_bw_gbps"])
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
    return load_yaml(path, "hardware profile")


def _load_dir(folder: Path, policy: Policy | None) -> list[HardwareProfile]:
    if not folder.is_dir():
        return []
    return [from_dict(_read_yaml(p), str(p), policy=policy) for p in sorted(folder.glob("*.yaml"))]


def available(*, policy: Policy | None = None) -> list[HardwareProfile]:
    """Shipped profiles, then user-calibrated ones; a user profile replaces a shipped one by name."""
    by_name: dict[str, HardwareProfile] = {}
    for prof in _load_dir(configs_dir() / "hardware", policy):
        by_name[norm_name(prof.name)] = prof
    for prof in _load_dir(user_dir(), policy):
        by_name[norm_name(prof.name)] = prof
    return list(by_name.values())


def known_names(profiles: list[HardwareProfile] | None = None) -> list[str]:
    return [p.name for p in (profiles if profiles is not None else available())]


def _is_file_ref(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml")) or "/" in name or os.sep in name


def load(name: str, *, policy: Policy | None = None) -> HardwareProfile:
    """A profile by name or alias (case-insensitive), or from a YAML file (`calibrate --out`
    writes one anywhere). Unknown -> InputError listing the known names."""
    if _is_file_ref(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise InputError("hardware profile file not found", path=str(path),
                             hint="give a part name (`cannbot prefetch hardware list`) or a YAML file")
        return from_dict(_read_yaml(path), str(path), policy=policy)
    named = _by_file_name(name, policy)
    if named is not None:
        return named
    profiles = available(policy=policy)
    for prof in profiles:
        if prof.matches(name):
            return prof
    hint = "run `cannbot prefetch hardware calibrate` first" if norm_name(name) == "cpu" else \
        "see `cannbot prefetch hardware list`"
    raise InputError(f"unknown hardware {name!r}; known: {', '.join(known_names(profiles))}", hint=hint)


def _by_file_name(name: str, policy: Policy | None) -> HardwareProfile | None:
    """The shipped profile whose file is named after the part (`910B3` -> 910B3.yaml), read
    alone instead of every profile, when no user profile could replace it (the user folder
    holds none; a user profile replaces a shipped one by its `name` field, which only reading
    it tells). None when no file has that name or its profile does not answer to it."""
    user = user_dir()
    if user.is_dir() and any(user.glob("*.yaml")):
        return None
    want = norm_name(name)
    folder = configs_dir() / "hardware"
    path = next((p for p in sorted(folder.glob("*.yaml")) if norm_name(p.stem) == want), None)
    if path is None:
        return None
    prof = from_dict(_read_yaml(path), str(path), policy=policy)
    return prof if prof.matches(name) else None


def _match_soc(soc: str, profiles: list[HardwareProfile]) -> HardwareProfile | None:
    for prof in profiles:
        if prof.matches(soc):
            return prof
    return None


def _match_cores(cores: int, mhz: float, profiles: list[HardwareProfile], share: float,
                 ) -> list[HardwareProfile]:
    """Profiles with this cube-core count and frequency (within `share`, policy
    `profiling.freq_match_share`), Ascend first, 910B before A3."""
    hits = [p for p in profiles if not p.measured and p.cube_cores == cores and p.freq_mhz
            and abs(p.freq_mhz - mhz) <= share * p.freq_mhz]
    return sorted(hits, key=lambda p: (p.vendor != "Huawei", p.name))


def resolve(name: str | None, info: "ProfileInfo | None" = None, *,
            policy: Policy | None = None) -> HardwareProfile:
    """The part to use: explicit `name` wins; else the profile's SoC name; else its (cube cores,
    MHz); else 910B3, with `detected_from` saying it is an assumption (the caller warns)."""
    if name:
        prof = load(name, policy=policy)
        return replace(prof, detected_from=f"--hardware {name}")
    profiles = available(policy=policy)
    soc = getattr(info, "soc", None) if info is not None else None
    if soc:
        prof = _match_soc(soc, profiles)
        if prof is not None:
            return replace(prof, detected_from=_said("said.hw_soc", soc=repr(soc)))
    cores = getattr(info, "cube_cores", None) if info is not None else None
    mhz = getattr(info, "freq_mhz", None) if info is not None else None
    if cores and mhz:
        hits = _match_cores(int(cores), float(mhz), profiles,
                            float((policy or Policy.load())["profiling"]["freq_match_share"]))
        if hits:
            also = [p.name for p in hits[1:]]
            extra = _said("part.hw_same_numbers", names=", ".join(also)) if also else ""
            return replace(hits[0], detected_from=_said("said.hw_detected", cores=cores, mhz=mhz, extra=extra))
    if getattr(info, "chip_class", None) == "A1":
        # The counter layout says Ascend 910 (A1-class), not which 910 part: still an assumption.
        return replace(load(A1_PART, policy=policy), detected_from=_said("said.hw_assumed_a1", part=A1_PART))
    prof = load(DEFAULT_PART, policy=policy)
    if info is None:   # manual mode: no profile to detect a part from
        return replace(prof, detected_from=_said("said.hw_default", part=DEFAULT_PART))
    said = []
    if soc:
        said.append(_said("part.hw_soc_unknown", soc=repr(soc)))
    if cores or mhz:
        unknown = _said("part.unknown")
        said.append(_said("part.hw_cores_no_match", cores=cores if cores else unknown,
                          mhz=f"{mhz:g}" if mhz else unknown))
    why = "; ".join(said) if said else _said("part.hw_no_part")
    return replace(prof, detected_from=_said("said.hw_assumed", part=DEFAULT_PART, why=why))


def is_assumed(prof: HardwareProfile) -> bool:
    """True when `resolve` fell back to the default part (the caller prints a one-line warning)."""
    return prof.detected_from.startswith(("assumed ", "default "))


def calibrate(out_path: str | Path | None = None, *, seconds: float = 3.0,
              method: str = "auto", policy: Policy | None = None) -> HardwareProfile:
    """Measure this host's matmul rate and memory bandwidth; write and return a `cpu` profile."""
    from .calibration import measure_host
    return measure_host(out_path, seconds=seconds, method=method, policy=policy)
