"""Fixtures for the profiling reader tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from _profiling_helpers import LEVEL1_HEADER, level1_row, write_csv


@pytest.fixture
def level1_csv(tmp_path: Path) -> Path:
    """Three steps x 4 kernels, start times with a TAB, one MemSet helper."""
    rows = []
    t = 1736408883716197
    for step in (10, 11, 12):
        for k in range(4):
            rows.append(level1_row(step, f"{t}.{k * 111:03d}\t", task=step * 10 + k))
            t += 100
        rows.append(level1_row(step, f"{t}.5", name="aclnnMatmul_MatMulCommon_MemSet",
                               type_="MemSet", task=step * 10 + 9))
        t += 100
    return write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)
