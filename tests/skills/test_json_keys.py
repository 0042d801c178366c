"""Every key and code the `--json` outputs can contain is documented once, in the prefetch
skill's references/json-keys.md (issue 9: `max_sites`, `top`, `predecessors` were missing).

The documents come from real runs of every command on the bundled Llama example (a copy of
transformers' modeling_llama.py as the model source); keys under maps whose keys are data
(hardware sources and peaks, report thresholds and files, overrides) are not keys to document.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "skills" / "model-infer-prefetch" / "references" / "json-keys.md"
EXAMPLE = REPO / "examples" / "llama3.2-1b-en"
DATA_MAPS = {"sources", "peaks", "peaks_tflops", "overrides", "thresholds", "files"}
runner = CliRunner()


def _keys(obj, acc: set[str], parent: str = "") -> set[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if parent == "files" and "." in k:      # report: {file name: path}
                continue
            acc.add(k)
            if k not in DATA_MAPS:
                _keys(v, acc, k)
    elif isinstance(obj, list):
        for v in obj:
            _keys(v, acc, parent)
    return acc


def _run(*args) -> dict:
    res = runner.invoke(app, ["prefetch", *args, "--json"])
    assert res.stdout.strip(), res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("keys")
    src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    shutil.copy(src, tmp / "modeling_llama.py")
    profile, config = str(EXAMPLE / "profile"), str(EXAMPLE / "config.json")
    plan = str(tmp / "prefetch_plan.yaml")
    docs = {
        "analyze": _run("analyze", profile, "--model-src", str(tmp / "modeling_llama.py"),
                        "--model-config", config, "--out", str(tmp)),
        "analyze (no model)": _run("analyze", profile, "--out", str(tmp / "x")),
        "analyze (manual)": _run("analyze", "--target", "LlamaMLP.down_proj", "--model-src",
                                 str(tmp / "modeling_llama.py"), "--model-config", config,
                                 "--out", str(tmp / "manual")),
        "apply": _run("apply", plan),
        "report (baseline)": _run("report", "--plan", plan, "--baseline", profile,
                                  "--out", str(tmp / "r1" / "report.md")),
        "report (a/b)": _run("report", "--plan", plan, "--baseline", profile, "--optimized",
                             profile, "--out", str(tmp / "r2" / "report.md")),
        "hardware list": _run("hardware", "list"),
        "hardware show": _run("hardware", "show", "910B3"),
        "error": _run("analyze", "/no/such/profile"),
    }
    from cannbot_prefetch.verify.checks import Check
    from cannbot_prefetch.verify.runner import VerifyResult

    docs["verify"] = VerifyResult("plan.yaml", "m:f", True, [Check("fires", True, "ok", "s1")]).to_json()
    return docs


def test_every_output_key_is_documented(documents):
    text = DOC.read_text(encoding="utf-8")
    documented = {w for span in re.findall(r"`([^`]+)`", text)
                  for w in re.findall(r"[A-Za-z_]\w*", span)}
    missing = {}
    for name, doc in documents.items():
        for key in sorted(_keys(doc, set()) - documented):
            missing.setdefault(key, name)
    assert missing == {}, f"document these keys in {DOC.relative_to(REPO)}: {missing}"


def test_every_reason_code_is_documented():
    from cannbot_prefetch import reasons

    text = DOC.read_text(encoding="utf-8")
    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    assert codes and all(f"`{c}`" in text for c in codes), sorted(c for c in codes if f"`{c}`" not in text)


def test_every_report_code_is_documented():
    from cannbot_prefetch.report import markdown, rules

    text = DOC.read_text(encoding="utf-8")
    codes = set(rules.OUTCOMES) | set(rules.ACTIONS) | set(markdown.SIGNAL_NAMES) \
        | set(markdown.BANNER_NAMES) | set(markdown.OVERALL)
    missing = sorted(c for c in codes if f"`{c}`" not in text)
    assert missing == []


def test_negative_an_undocumented_key_is_found():
    doc = {"profile": {"path": "p"}, "brand_new_key": 1, "hardware": {"sources": {"x.y": "s"}}}
    assert _keys(doc, set()) == {"profile", "path", "brand_new_key", "hardware", "sources"}
