"""`apply` under faults and clumsy use (issue 11 D5, D8, D9, D10, D13): files without a final
newline, two plans on one file (one after the other and at the same time), the write order,
temp files a killed run left, file modes, the plan's status, symlinked model files, and the
analyze/report seams of D13. The toy model is tests/fixtures/vllm_style/toy_model.py; the
SIGKILL loop on real transformers files is tests/fuzz/test_fault_suite.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.errors import Conflict
from cannbot_prefetch.plan import (Basis, Insert, Join, Plan, Saving, Site, Switch, Target,
                                   load_plan, save_plan, sha256_file)
from cannbot_prefetch.rewrite import files, write
from cannbot_prefetch.rewrite.markers import marked_ids

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style"
REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _site(id, cls, attr, weight, icls, anchor, dep, sha, position="before", file="toy_model.py",
          where="end"):
    return Site(id=id, target=Target(file, cls, attr, weight), insert=Insert(icls, "forward", anchor, position),
                dependency=dep, join=Join(icls, "forward", where), max_size=512,
                basis=Basis((16, 32), 4.0, 0.5), ladder={}, mapping="manual", evidence={},
                saving_us=Saving(0, 0, 0), source_sha256=sha, max_tokens=64)


def down(sha, **kw):
    return _site("toy-down", "ToyMLP", "down_proj", "self.down_proj.weight", "ToyMLP",
                 "self.up_proj", "h", sha, position="after", **kw)


def up(sha, **kw):
    return _site("toy-up", "ToyMLP", "up_proj", "self.mlp.up_proj.weight", "ToyLayer", "self.mlp",
                 "h", sha, **kw)


@pytest.fixture()
def project(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.chdir(proj)               # apply's default root: the folder it runs in
    shutil.copyfile(FIX / "toy_model.py", proj / "toy_model.py")
    sha = sha256_file(proj / "toy_model.py")
    save_plan(Plan(sites=(down(sha),)), proj / "plan_a.yaml")
    save_plan(Plan(sites=(up(sha),)), proj / "plan_b.yaml")
    return proj


def _apply(plan: Path, *extra: str):
    return runner.invoke(app, ["prefetch", "apply", str(plan), *extra])


# ---------------------------------------------------------------- D5

def test_d5_no_final_newline_check_and_revert_byte_identical(project):
    model = project / "toy_model.py"
    model.write_bytes(model.read_bytes().rstrip(b"\n"))
    original = model.read_bytes()
    save_plan(Plan(sites=(down(sha256_file(model)),)), project / "plan_a.yaml")
    assert _apply(project / "plan_a.yaml", "--write", "--yes").exit_code == 0
    assert model.read_bytes() != original and not model.read_bytes().endswith(b"\n")
    res = _apply(project / "plan_a.yaml", "--check")
    assert res.exit_code == 0, res.output
    assert "changed since" not in res.output
    assert _apply(project / "plan_a.yaml", "--revert", "--yes").exit_code == 0
    assert model.read_bytes() == original


# ---------------------------------------------------------------- D8

def test_d8_second_plan_on_the_same_file_refused_first_kept(project):
    model = project / "toy_model.py"
    assert _apply(project / "plan_a.yaml", "--write", "--yes").exit_code == 0
    after_a = model.read_bytes()
    res = _apply(project / "plan_b.yaml", "--write", "--yes")
    assert res.exit_code == 1 and "toy-down" in res.output and "another plan" in res.output
    assert model.read_bytes() == after_a
    assert load_plan(project / "plan_b.yaml").status == "proposed"
    # reverting the plan that never applied keeps the other plan's lines
    assert _apply(project / "plan_b.yaml", "--revert", "--yes").exit_code == 0
    assert model.read_bytes() == after_a
    assert (project / "_cannbot_prefetch.py").exists()
    assert _apply(project / "plan_a.yaml", "--revert", "--yes").exit_code == 0
    assert model.read_bytes() == (FIX / "toy_model.py").read_bytes()


def test_d8_prepared_twice_committed_twice_second_is_a_conflict(project):
    a = files.prepare(project / "plan_a.yaml")
    b = files.prepare(project / "plan_b.yaml")
    write.commit(a)
    with pytest.raises(Conflict, match="changed while this apply ran"):
        write.commit(b)
    text = (project / "toy_model.py").read_text()
    assert "cannbot-prefetch: toy-down" in text and "toy-up" not in text


def _cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from cannbot_prefetch.cli import main; main()",
                             "prefetch", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.slow
def test_d8_two_applies_at_once_one_wins_one_exits_1(project):
    model = project / "toy_model.py"
    for _ in range(3):
        procs = [_cli("apply", str(project / p), "--write", "--yes")
                 for p in ("plan_a.yaml", "plan_b.yaml")]
        outs = [p.communicate(timeout=120) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0, 1], (codes, outs)
        loser = outs[codes.index(1)][1]
        assert "another plan" in loser or "changed while" in loser or "holds the lock" in loser
        text = model.read_text()
        winner = ("toy-down", "toy-up")[codes.index(0)]
        assert f"cannbot-prefetch: {winner}" in text
        assert len({"toy-down", "toy-up"} & set(marked_ids(text))) == 1
        plan = project / ("plan_a.yaml", "plan_b.yaml")[codes.index(0)]
        assert load_plan(plan).status == "applied"
        assert _apply(plan, "--revert", "--yes").exit_code == 0
        assert model.read_bytes() == (FIX / "toy_model.py").read_bytes()


# ---------------------------------------------------------------- D9

def test_d9_helper_first_models_last_plan_after_and_revert_reversed(project, monkeypatch):
    order = []
    real = write.write_atomic

    def spy(path, data, mode=None):
        order.append(Path(path).name)
        real(path, data, mode)

    monkeypatch.setattr(write, "write_atomic", spy)
    import cannbot_prefetch.plan.store as store
    monkeypatch.setattr(store, "write_atomic", spy)
    (project / "runner.yaml").write_text("a: 1\n")
    sha = sha256_file(project / "toy_model.py")
    save_plan(Plan(sites=(down(sha),), switch=Switch(config_file="runner.yaml")),
              project / "plan_a.yaml")
    order.clear()
    assert _apply(project / "plan_a.yaml", "--write", "--yes").exit_code == 0
    written = [n for n in order if not n.endswith(".bak")]
    assert written == ["_cannbot_prefetch.py", "runner.yaml", "toy_model.py", "plan_a.yaml"]
    assert order.index("_cannbot_prefetch.py") > max(i for i, n in enumerate(order) if n.endswith(".bak"))
    order.clear()
    assert _apply(project / "plan_a.yaml", "--revert", "--yes").exit_code == 0
    assert [n for n in order if not n.endswith(".bak")] == ["toy_model.py", "runner.yaml", "plan_a.yaml"]
    assert not (project / "_cannbot_prefetch.py").exists()   # removed last


def test_d9_temp_files_of_a_killed_run_removed_by_the_next(project):
    stale = [project / ".toy_model.py.cbp-tmp-ab12cd", project / "._cannbot_prefetch.py.cbp-tmp-x",
             project / ".plan_a.yaml.cbp-tmp-zz"]
    for p in stale:
        p.write_text("half a file")
    keep = project / ".toy_model.py.notours"          # not ours: never touched
    keep.write_text("user file")
    res = _apply(project / "plan_a.yaml")
    assert "killed run" in res.output and all(p.exists() for p in stale)   # dry run: only said
    assert _apply(project / "plan_a.yaml", "--write", "--yes").exit_code == 0
    assert not any(p.exists() for p in stale) and keep.exists()
    # a run with nothing to write still tidies up
    stale[0].write_text("again")
    res = _apply(project / "plan_a.yaml", "--write", "--yes")
    assert res.exit_code == 0 and not stale[0].exists() and "removed 1 temp file" in res.output


def test_d9_modes_kept_and_never_0600_on_the_way(project, monkeypatch):
    model, plan = project / "toy_model.py", project / "plan_a.yaml"
    model.chmod(0o640)
    plan.chmod(0o644)
    seen = {}
    real_replace = os.replace

    def spy(src, dst):
        seen[Path(dst).name] = os.stat(src).st_mode & 0o777
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    old = os.umask(0o022)
    try:
        assert _apply(plan, "--write", "--yes").exit_code == 0
    finally:
        os.umask(old)
    assert model.stat().st_mode & 0o777 == 0o640 and seen["toy_model.py"] == 0o640
    assert plan.stat().st_mode & 0o777 == 0o644 and seen["plan_a.yaml"] == 0o644
    assert (project / "_cannbot_prefetch.py").stat().st_mode & 0o777 == 0o644
    assert seen["_cannbot_prefetch.py"] == 0o644


def test_d9_plan_status_follows_the_files(project):
    plan = project / "plan_a.yaml"
    assert _apply(plan, "--write", "--yes").exit_code == 0
    save_plan(load_plan(plan).with_status("proposed"), plan)   # a kill before the plan's save
    res = _apply(plan, "--write", "--yes")
    assert res.exit_code == 0 and "plan status set to applied" in res.output
    assert load_plan(plan).status == "applied"


# ---------------------------------------------------------------- D10

def test_d10_symlinked_model_helper_next_to_the_imported_path(project, monkeypatch):
    torch = pytest.importorskip("torch")
    from cannbot_prefetch.verify.stub import stub_torch_npu

    (project / "vendor").mkdir()
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    shutil.move(project / "toy_model.py", project / "vendor" / "real_model.py")
    (project / "pkg" / "toy_model.py").symlink_to(Path("..") / "vendor" / "real_model.py")
    sha = sha256_file(project / "vendor" / "real_model.py")
    save_plan(Plan(sites=(down(sha, file="pkg/toy_model.py"),)), project / "plan.yaml")
    res = _apply(project / "plan.yaml", "--write", "--yes")
    assert res.exit_code == 0, res.output
    link = project / "pkg" / "toy_model.py"
    assert link.is_symlink()                                   # the link stays a link
    assert "cannbot-prefetch: toy-down" in (project / "vendor" / "real_model.py").read_text()
    assert (project / "pkg" / "_cannbot_prefetch.py").is_file()
    assert not (project / "vendor" / "_cannbot_prefetch.py").exists()
    monkeypatch.syspath_prepend(str(project))
    for m in ("pkg", "pkg.toy_model", "pkg._cannbot_prefetch"):
        monkeypatch.delitem(sys.modules, m, raising=False)
    import importlib
    mod = importlib.import_module("pkg.toy_model")              # imported through the link
    model = mod.ToyModel(mod.ToyConfig(enable_prefetch=True))
    with stub_torch_npu() as rec:
        model(torch.zeros(1, 16))
    assert len(rec.calls) == 2                                 # one per layer: the site fired
    for m in ("pkg", "pkg.toy_model", "pkg._cannbot_prefetch"):
        sys.modules.pop(m, None)


# ---------------------------------------------------------------- D13 (not the readers)

def test_d13_zero_overrides_are_refused_not_ignored(samples_or_example):
    for args in (["--hbm-bw", "0"], ["--cmo-bw", "0"], ["--lookback", "0"], ["--max-size-cap", "0"]):
        res = runner.invoke(app, ["prefetch", "analyze", str(samples_or_example), *args])
        assert res.exit_code == 2, (args, res.output)
        assert args[0] in res.output


@pytest.fixture()
def samples_or_example():
    return REPO / "examples" / "llama3.2-1b-en" / "profile"


def test_d13_manual_plan_made_with_a_profile_is_found_in_that_profile(tmp_path):
    transformers = pytest.importorskip("transformers")
    src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    shutil.copyfile(src, tmp_path / "modeling_llama.py")
    ex = REPO / "examples" / "llama3.2-1b-en"
    res = runner.invoke(app, ["prefetch", "analyze", str(ex / "profile"), "--model-src",
                              str(tmp_path / "modeling_llama.py"), "--model-config",
                              str(ex / "config.json"), "--target", "LlamaAttention.k_proj",
                              "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    plan = load_plan(tmp_path / "out" / "prefetch_plan.yaml")
    assert plan.sites[0].mapping == "manual"
    assert plan.sites[0].evidence["signature"]["input_shapes"] == "1,2048;512,2048"
    res = runner.invoke(app, ["prefetch", "report", "--plan", str(tmp_path / "out" / "prefetch_plan.yaml"),
                              "--baseline", str(ex / "profile"), "--out",
                              str(tmp_path / "out" / "r" / "report.md")])
    assert res.exit_code == 0, res.output
    assert "not in the baseline" not in res.output and "neither profile" not in res.output


def test_d13_outputs_get_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        ex = REPO / "examples" / "llama3.2-1b-en"
        transformers = pytest.importorskip("transformers")
        src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
        shutil.copyfile(src, tmp_path / "modeling_llama.py")
        res = runner.invoke(app, ["prefetch", "analyze", str(ex / "profile"), "--model-src",
                                  str(tmp_path / "modeling_llama.py"), "--model-config",
                                  str(ex / "config.json"), "--out", str(tmp_path / "out")])
        assert res.exit_code == 0, res.output
    finally:
        os.umask(old)
    for name in ("prefetch_plan.yaml", "prefetch_design.md"):
        assert (tmp_path / "out" / name).stat().st_mode & 0o777 == 0o644, name
