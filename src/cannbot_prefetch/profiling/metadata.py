"""What an export says about itself: profiler level, counter group, rank, cores, clock, SoC.

Sources: torch_npu `profiler_info_*.json`, msprof `device_*/info.json.*` (searched across the
whole group when the chosen run lacks one: every run of a group ran on the same device), and
facts a reader found inside the data (the DB's NPU_INFO / AICORE_FREQ).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import columns as C

_MAX_META_BYTES = 16 << 20   # profiler_info / info.json are a few KB


@dataclass
class Meta:
    level: str | None = None
    aic_metrics: str | None = None
    rank: int | None = None
    soc: str | None = None
    cube_cores: int | None = None
    vector_cores: int | None = None
    freq_mhz: float | None = None
    sources: tuple[str, ...] = ()

    def fill(self, **facts) -> None:
        """Set each fact not already known (the first source to state one wins)."""
        for key, value in facts.items():
            if value is not None and getattr(self, key) is None:
                setattr(self, key, value)


def read_meta(root: Path, search_root: Path | None = None) -> Meta:
    """Metadata files under a profile root (and, for info.json, a group root)."""
    meta = Meta()
    sources: list[str] = []
    for info in _profiler_infos(root):
        data = load_small_json(info)
        if not isinstance(data, dict):
            continue
        sources.append(str(info))
        config = data.get("config")
        exp = config.get("experimental_config") if isinstance(config, dict) else None
        if not isinstance(exp, dict):
            exp = {}
        rank = data.get("rank_id")
        meta.fill(level=_level(exp.get("_profiler_level")),
                  aic_metrics=_metrics(exp.get("_aic_metrics")),
                  rank=rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0
                  else None)
    for where, depth in ((root, 1), (search_root, 4)):
        if where is None or meta.cube_cores is not None:
            continue
        for info in _device_infos(where, depth):
            device = _device_info(load_small_json(info))
            if device:
                sources.append(str(info))
                meta.fill(**device)
                break
    meta.sources = tuple(sources)
    return meta


def _profiler_infos(root: Path) -> list[Path]:
    found = sorted(p for p in root.glob("profiler_info*.json") if p.is_file())
    if not found and root.name == "ASCEND_PROFILER_OUTPUT":
        found = sorted(p for p in root.parent.glob("profiler_info*.json") if p.is_file())
    return found


def _device_infos(root: Path, max_depth: int) -> list[Path]:
    """`device_<N>/info.json.<N>` files, nearest first, at most `max_depth` levels down."""
    found: list[Path] = []
    for depth in range(0, max_depth + 1):
        pattern = "/".join(["*"] * depth + ["device_*", "info.json*"])
        found.extend(sorted(p for p in root.glob(pattern) if p.is_file()))
        if found:
            break
    return found


def load_small_json(path: Path):
    """A small metadata JSON (a BOM tolerated); None when unreadable, huge or not JSON, since
    metadata only ever adds facts: its damage never costs the kernels."""
    from ..errors import InputError
    from ..inputfile import read_regular

    try:
        raw = read_regular(path, "metadata", _MAX_META_BYTES)
        return json.loads(raw.decode("utf-8-sig", errors="replace"))
    except (InputError, OSError, ValueError, RecursionError):
        return None


def _level(value) -> str | None:
    if not isinstance(value, str):
        return None
    m = re.search(r"level\s*_?(\d)", value, re.IGNORECASE)
    if m:
        return f"Level{m.group(1)}"
    return "Level_none" if "none" in value.lower() else None


def _metrics(value) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if value in C.ACL_METRICS:
        return C.ACL_METRICS[value]
    if value.startswith("ACL_AICORE_"):
        return "".join(p.capitalize() for p in value[len("ACL_AICORE_"):].split("_"))
    return value


def _device_info(data) -> dict | None:
    if not isinstance(data, dict):
        return None
    devices = data.get("DeviceInfo")
    if not isinstance(devices, list) or not devices or not isinstance(devices[0], dict):
        return None
    dev = devices[0]
    out = {"cube_cores": _int(dev.get("ai_core_num")), "vector_cores": _int(dev.get("aiv_num")),
           "freq_mhz": _float(dev.get("aic_frequency"))}
    return {k: v for k, v in out.items() if v}


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _float(value) -> float | None:
    try:
        out = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return out if out > 0 else None


def infer_level(has_type: bool, has_shapes: bool) -> str:
    """No profiler_info: Level0 writes N/A types and no shapes; Level1+ writes both."""
    return "Level1" if (has_type and has_shapes) else "Level0"


LEVEL0_NOTE = ("Level0 profile: no op types, shapes or counters, so MatMuls are listed by name "
               "only. Classification needs Level1 + PipeUtilization: torch_npu.profiler."
               "_ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1, "
               "aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization) with "
               "record_shapes=True, with_stack=True")
