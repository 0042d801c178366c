"""`cannbot prefetch verify` through the CLI, after `apply --write`, on the toy model."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.plan import Basis, Insert, Join, Plan, Saving, Site, Switch, Target, save_plan, \
    sha256_file

pytest.importorskip("torch")

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style"
runner = CliRunner()


def _site(id, cls, attr, weight, icls, anchor, dep, position="before", sha="", size=1024):
    return Site(id=id, target=Target("toy_model.py", cls, attr, weight),
                insert=Insert(icls, "forward", anchor, position), dependency=dep,
                join=Join(icls, "forward", "end"), max_size=size, basis=Basis((32, 16), 4.0, 0.5),
                ladder={}, mapping="manual", evidence={}, saving_us=Saving(0, 0, 0),
                source_sha256=sha, max_tokens=64)


@pytest.fixture()
def call():
    """The plan's call form (None: the eager default, direct)."""
    return None


@pytest.fixture()
def applied(tmp_path, monkeypatch, call):
    for name in ("toy_model.py", "toy_factory.py"):
        shutil.copyfile(FIX / name, tmp_path / name)
    sha = sha256_file(tmp_path / "toy_model.py")
    plan = Plan(sites=(
        _site("toy-o", "ToyLayer", "o_proj", "self.o_proj.weight", "ToyLayer", "self.norm", "x", sha=sha),
        _site("toy-up", "ToyMLP", "up_proj", "self.mlp.up_proj.weight", "ToyLayer", "self.mlp", "h", sha=sha),
        _site("toy-down", "ToyMLP", "down_proj", "self.down_proj.weight", "ToyMLP", "self.up_proj", "h",
              position="after", sha=sha),
    ), mode="eager", switch=Switch(), call=call)
    save_plan(plan, tmp_path / "plan.yaml")
    monkeypatch.chdir(tmp_path)           # apply's default root: the folder it runs in
    res = runner.invoke(app, ["prefetch", "apply", str(tmp_path / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 0, res.output
    for mod in ("toy_model", "toy_factory", "_cannbot_prefetch"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    yield tmp_path
    for mod in ("toy_model", "toy_factory", "_cannbot_prefetch"):
        sys.modules.pop(mod, None)


def test_verify_passes_table_and_json(applied):
    res = runner.invoke(app, ["prefetch", "verify", "plan.yaml", "--factory", "toy_factory.py:build",
                              "--out", "verify.json"])
    assert res.exit_code == 0, res.output
    assert "graph order" in res.output and "FAIL" not in res.output
    data = json.loads((applied / "verify.json").read_text())
    assert data["passed"] is True and data["torch_npu"].startswith("stub")
    names = {(c["name"], c["site"]) for c in data["checks"]}
    for sid in ("toy-o", "toy-up", "toy-down"):
        assert ("fires", sid) in names and ("graph order", sid) in names
        assert ("captured prefetch", sid) in names
    for name in ("compile eager", "compile aot_eager", "recompiles", "compile inductor"):
        assert (name, None) in names
    # eager's default call form is direct (cann-recipes-infer's prefetch principles): no join
    assert ("side stream joined", None) not in names
    assert "call form direct" in {c["name"]: c for c in data["checks"]}["switch"]["detail"]
    assert "_cbp.join(" not in (applied / "toy_model.py").read_text()
    assert "torch_npu" not in sys.modules  # the stub is gone after verify


def test_verify_fails_when_a_prefetch_is_moved_after_its_target(applied):
    code = (applied / "toy_model.py").read_text()
    lines = code.splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if "cannbot-prefetch: toy-o" in ln)
    moved = lines.pop(k)
    j = next(i for i, ln in enumerate(lines) if "x = x + a" in ln)
    lines.insert(j, moved.replace("self.o_proj.weight, x,", "self.o_proj.weight, a,"))
    (applied / "toy_model.py").write_text("".join(lines))
    res = runner.invoke(app, ["prefetch", "verify", "plan.yaml", "--factory", "toy_factory.py:build",
                              "--json"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    bad = [c for c in data["checks"] if not c["passed"]]
    # the eager run's count of target runs (each run preceded by its prefetch, verify/runs.py),
    # the per-layer make_fx check and the torch.compile graphs all see it
    assert [(c["name"], c["site"]) for c in bad] == [("fires", "toy-o"), ("graph order", "toy-o"),
                                                     ("captured prefetch", "toy-o")]
    assert "ran the target with no prefetch since the previous step" in bad[0]["detail"]
    assert all("runs before the prefetch" in c["detail"] for c in bad[1:])


def test_verify_bad_factory_exit_2(applied):
    res = runner.invoke(app, ["prefetch", "verify", "plan.yaml", "--factory", "no_colon"])
    assert res.exit_code == 2 and "MODULE:FUNC" in res.output
    res = runner.invoke(app, ["prefetch", "verify", "plan.yaml", "--factory", "toy_factory.py:nope"])
    assert res.exit_code == 2 and "no function nope" in res.output


@pytest.mark.parametrize("call", ["side_stream"])
def test_side_stream_form_is_refused_under_inductor(applied):
    """Issue 30 part 5: Inductor schedules the join right after its prefetch (the prefetch then
    blocks); verify says so for the side_stream form, and the side stream is joined in the
    eager and aot_eager graphs."""
    from cannbot_prefetch.verify.capture import _cxx

    assert "_cbp.join(" in (applied / "toy_model.py").read_text()
    res = runner.invoke(app, ["prefetch", "verify", "plan.yaml", "--factory", "toy_factory.py:build",
                              "--json"])
    data = json.loads(res.stdout)
    checks = {c["name"]: c for c in data["checks"] if c["site"] is None}
    assert checks["side stream joined"]["passed"], checks["side stream joined"]
    ind = checks["compile inductor"]
    if _cxx() is None:
        assert ind["skipped"] and "no C++ compiler" in ind["detail"]
        return
    assert not ind["passed"] and "hoists the join" in ind["detail"], ind
    assert "call: direct" in ind["detail"]
    assert res.exit_code == 1
