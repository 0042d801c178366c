"""Issue 31 (e): a rank folder that exists but holds no kernel table is named for what it is.

On the REAL msinsight-st-qwen3-train job (../shared, skipped when absent) ranks 1 and 3 kept only
analysis.db and communication files; `--rank 1` says so (exit 2, nothing written) and `--rank all`
names both skipped ranks and why."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.profiling.discover import empty_ranks

QWEN3 = "msinsight-st-qwen3-train"


@pytest.fixture
def job(samples):
    path = samples / QWEN3
    if not (path / "rank_1_ascend_pt").is_dir():
        pytest.skip(f"{path} not found")
    return path


def test_empty_ranks_are_found_with_what_they_hold(job):
    found = {r: (folder.name, why) for r, folder, why in empty_ranks(job)}
    assert sorted(found) == [1, 3]
    assert found[1][0] == "rank_1_ascend_pt"
    assert "no kernel table" in found[1][1] and "analysis.db" in found[1][1]


def test_rank_without_kernel_table_says_so(job, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(job), "--rank", "1", "--out",
                                   str(out), "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["error"]
    assert "rank 1 (rank_1_ascend_pt) is here but has no kernel table" in err["message"]
    assert "ranks with a kernel table: 0" in err["message"] and "not found" not in err["message"]
    assert not out.exists()
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(job), "--rank", "2", "--out", str(out)])
    assert res.exit_code == 2 and "rank 2 not found; ranks here: 0" in res.output


def test_rank_all_names_the_skipped_ranks(job, tmp_path):
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(job), "--rank", "all", "--hardware",
                                   "910B3", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    note = next(n for n in doc["notes"] if n.startswith("--rank all"))
    assert "1 rank(s) read (0)" in note
    assert "rank 1 skipped (rank_1_ascend_pt: no kernel table" in note
    assert "rank 3 skipped (rank_3_ascend_pt: no kernel table" in note
