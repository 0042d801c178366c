"""The committed expected outputs of the language examples match a fresh run (normalized).

When an intended change alters them: python tests/integration/expected_outputs.py
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import expected_outputs as eo  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=eo.EXAMPLES, ids=lambda e: e.label)
def fresh(request, tmp_path_factory):
    ex = request.param
    dest = ex.dest
    if not dest.exists():
        pytest.skip(f"no expected outputs committed yet for {ex.name}")
    pytest.importorskip("transformers", reason="the model source is the installed transformers file")
    _, src = eo.model_src(ex)
    if not src.exists():
        pytest.skip(f"model source {src} not installed")
    pinned = eo.pinned_source_sha(ex)
    if pinned and eo.sha256_of(src) != pinned:
        pytest.skip(f"{src.name} differs from the one the generated call stacks were made for "
                    f"(transformers {eo.pinned_transformers()}): mapping would differ")
    out = tmp_path_factory.mktemp(ex.name + "-" + ex.profile)
    codes = eo.run(ex, out)
    return ex, dest, out, codes


def test_exit_codes(fresh):
    ex, dest, out, codes = fresh
    assert codes.get("analyze") == 0, (out / "analyze.stderr.txt").read_text()
    assert codes.get("report") in (0, 3), (out / "report.stderr.txt").read_text()


def test_files_match(fresh):
    ex, dest, out, _ = fresh
    got = eo.produced(ex, out)
    committed = {f for f in eo.TEXT_FILES if (dest / f).exists()}
    assert set(got) == committed
    for f, text in got.items():
        want = (dest / f).read_text(encoding="utf-8")
        if text != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                f"expected/{f}", f"fresh/{f}", n=1))
            pytest.fail(f"{ex.name}: {f} differs (regenerate with "
                        f"python tests/integration/expected_outputs.py if intended):\n{diff[:4000]}")
    for f in eo.BINARY_FILES:
        assert (out / f).exists() == (dest / f).exists(), f


def test_plan_has_a_site_with_a_named_cap(fresh):
    ex, dest, out, _ = fresh
    import yaml

    plan = yaml.safe_load((out / "prefetch_plan.yaml").read_text(encoding="utf-8"))
    assert plan["sites"], plan.get("rejections")
    for site in plan["sites"]:
        assert site["max_size"] > 0
        assert site["basis"]["caps"]
    doc = json.loads((out / "analyze.json").read_text(encoding="utf-8"))
    assert any(s["verdict"] == "memory-bound" for s in doc["signatures"])
