"""Hardware profiles (profiles.py: the shipped and user YAML parts, detection, overrides) and the
host calibration (calibrate.py). The public names are re-exported here so callers write
`from cannbot_prefetch import hardware; hardware.resolve(...)`."""

from __future__ import annotations

from ..settings import configs_dir
from .profiles import (
    DEFAULT_PART,
    USER_DIR_ENV,
    HardwareProfile,
    available,
    calibrate,
    from_dict,
    is_assumed,
    known_names,
    load,
    parse_peak_overrides,
    peak_key,
    resolve,
    user_dir,
)

__all__ = ["DEFAULT_PART", "USER_DIR_ENV", "HardwareProfile", "available", "calibrate",
           "configs_dir", "from_dict", "is_assumed", "known_names", "load",
           "parse_peak_overrides", "peak_key", "resolve", "user_dir"]
