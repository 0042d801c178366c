"""docs/api.md's example runs as written: every ```python block of the page, in order, in one
namespace, in a temporary folder (the bundled GENERATED Llama profile; the example copies the
installed transformers modeling_llama.py there itself, as a user would into a project).
Then the files and statuses it promises are checked, so a page that drifts from the API fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "api.md"

pytestmark = pytest.mark.slow


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_page_has_the_example():
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 3, "docs/api.md lost its example blocks"
    assert any("Analysis.load" in b and ".save()" in b and ".write(" in b for b in blocks)


def test_api_doc_example_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "api_doc"}
    for block in python_blocks(PAGE.read_text(encoding="utf-8")):
        exec(compile(block, str(PAGE), "exec"), ns)

    import cannbot_prefetch as cp

    out = tmp_path / "out"
    # what the page says it writes, and nothing inside the repository
    assert sorted(ns["written"]) == ["out/prefetch_design.layer1.svg", "out/prefetch_design.md",
                                     "out/prefetch_plan.yaml"]
    assert (out / "prefetch_plan.yaml").is_file() and (out / "prefetch_design.md").is_file()
    assert ns["planned"].plan.sites, ns["planned"].rejections
    assert ns["pending"].status is cp.Status.CHECK_FAILED          # before apply: pending
    assert ns["rw"].written
    assert ns["report"].status is cp.Status.OK
    assert {Path(f).name for f in ns["files"]} >= {"report.md", "prefetch_plan.next.yaml",
                                                   "run_prefetch_ab.py"}
    assert ns["check"].status is cp.Status.OK, [c.to_json() for c in ns["check"].checks]
    assert (out / "verify.json").is_file()
    # revert took the inserted code out: the copy equals the installed file again
    import transformers
    installed = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    model = tmp_path / "my_project" / "modeling_llama.py"
    assert model.read_text(encoding="utf-8") == installed.read_text(encoding="utf-8")
    assert "cannbot-prefetch" not in model.read_text(encoding="utf-8")
    printed = capsys.readouterr().out
    assert "910B3" in printed and "OK" in printed


def test_import_is_lazy():
    """`import cannbot_prefetch` loads no submodule: the API loads on first use."""
    import subprocess
    import sys

    code = ("import sys, cannbot_prefetch as cp; "
            "print(sorted(m for m in sys.modules if m.startswith('cannbot_prefetch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['cannbot_prefetch']"
