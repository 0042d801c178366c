"""Where the companion files of a discovered profile are (step times, L2 hit rates, the
trace_view.json with call stacks): paths only, without polars, so the CLI can find the trace to
read ahead (trace_ahead.py) before its heavy imports. companions.py reads them."""

from __future__ import annotations

from pathlib import Path

# Layouts whose kernel table borrows call stacks from the trace_view.json beside it (load.py,
# and trace_ahead.py reading that trace early)
BORROWS_STACKS = frozenset({"ascend_pt", "kernel_csv"})
_NAMES = {"step_trace_time": "step_trace_time.csv", "l2_cache": "l2_cache.csv",
          "trace_view": "trace_view.json"}


def find_companions(unit) -> dict:
    """{"root", "step_trace_time", "l2_cache", "trace_view"}: paths found for a discovered unit."""
    root = Path(unit.root)
    out: dict = {"root": str(root)}
    for base in _bases(root, [Path(f) for f in unit.files]):
        for key, name in _NAMES.items():
            if key not in out and (base / name).is_file():
                out[key] = str(base / name)
    return out


def _bases(root: Path, files: list[Path]) -> list[Path]:
    bases = [f.parent for f in files] + [root, root / "ASCEND_PROFILER_OUTPUT",
                                         root / "mindstudio_profiler_output"]
    seen, out = set(), []
    for b in bases:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out
