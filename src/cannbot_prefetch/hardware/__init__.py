"""Hardware profiles (part.py: one part's numbers, peak keys and overrides; profiles.py: the
shipped and user YAML parts and detection) and the host calibration (calibration.py). The public names are re-exported here so callers write
`from cannbot_prefetch import hardware; hardware.resolve(...)`."""

from __future__ import annotations

from ..settings import configs_dir
from .part import HardwareProfile, parse_peak_overrides, peak_key
from .profiles import (
    DEFAULT_PART,
    USER_DIR_ENV,
    available,
    calibrate,
    from_dict,
    is_assumed,
    known_names,
    load,
    resolve,
    user_dir,
)

__all__ = ["DEFAULT_PART", "USER_DIR_ENV", "HardwareProfile", "available", "calibrate",
           "configs_dir", "from_dict", "is_assumed", "known_names", "load",
           "parse_peak_overrides", "peak_key", "resolve", "user_dir"]
