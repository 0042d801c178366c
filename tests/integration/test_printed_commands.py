"""Every `cannbot` command the design document and the report print runs as printed, from the
folder analyze ran in (issue 34 "no newcomer cliffs"): a newcomer copies them line by line.

The project is a tmp folder holding a copy of transformers' modeling_llama.py and the GENERATED
Llama example's config.json (examples/llama3.2-1b-en); the profile is that example's. analyze
writes into `out/x` (beside the model, not above it); the commands are read from the written
Markdown, split as a shell would (shlex) and run as the installed `cannbot` script. The A/B
script line of the report is not run: it profiles on an NPU host (torch_npu) with the user's
own factory.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from expected_outputs import RECORDING_SITE, cannbot_argv, site_packages

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "llama3.2-1b-en"


def _run(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cannbot_argv() + words, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _commands(text: str) -> list[str]:
    """`cannbot ...` commands of a Markdown text: indented or fenced lines, and inline code."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^\s*(cannbot prefetch [^#`]*?)\s*(#.*)?$", line)
        if m:
            found.append(m.group(1))
    found += re.findall(r"`(cannbot prefetch (?:apply|verify) [^`…]*)`", text)
    return found


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_design_and_report_commands_run_as_printed(tmp_path, lang):
    proj = tmp_path / "proj"
    model = proj / "model"
    model.mkdir(parents=True)
    llama = site_packages() / "transformers" / "models" / "llama" / "modeling_llama.py"
    shutil.copyfile(llama, model / "modeling_llama.py")
    shutil.copyfile(EXAMPLE / "config.json", model / "config.json")
    recorded = f"{RECORDING_SITE}/transformers/models/llama"
    res = _run(["prefetch", "analyze", str(EXAMPLE / "profile"), "--model-src", "model",
                "--model-config", "model/config.json", "--src-map", f"{recorded}={model}",
                "--out", "out/x", "--lang", lang], proj)
    assert res.returncode == 0, res.stderr
    design = _commands((proj / "out/x/prefetch_design.md").read_text(encoding="utf-8"))
    assert [c.split()[3:] for c in design] == [["out/x/prefetch_plan.yaml"],
                                               ["out/x/prefetch_plan.yaml", "--write", "--yes"]]
    for cmd in design:
        res = _run(shlex.split(cmd)[1:], proj)
        assert res.returncode == 0, f"{cmd}: {res.stderr}"
    assert "cannbot-prefetch:" in (model / "modeling_llama.py").read_text(encoding="utf-8")

    res = _run(["prefetch", "report", "--plan", "out/x/prefetch_plan.yaml", "--baseline",
                str(EXAMPLE / "profile"), "--out", "out/x/report/report.md", "--lang", lang], proj)
    assert res.returncode in (0, 3), res.stderr
    report = _commands((proj / "out/x/report/report.md").read_text(encoding="utf-8"))
    ran = {shlex.split(c)[2] for c in report}
    assert {"apply", "verify"} <= ran, report
    # in the order a user takes them: the revert, which takes the prefetches out, last
    for cmd in sorted(report, key=lambda c: "--revert" in c):
        res = _run(shlex.split(cmd)[1:], proj)
        assert res.returncode == 0, f"{cmd}: {res.stderr}"
    assert any("--revert" in c for c in report)
    assert "cannbot-prefetch:" not in (model / "modeling_llama.py").read_text(encoding="utf-8")
