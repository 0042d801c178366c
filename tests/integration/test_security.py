"""A plan is data, never code (issue 11 S1-S3): each attack from the issue, as a plan someone
sends you. Each test first shows the payload is live (the naive path, the one the tool used to
take, creates the marker file), then that the tool refuses it with exit 2 naming the field, and
that the marker file is NOT created and no file changes. S4 (model source) is in
tests/unit/mapping/test_source.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.plan import (Basis, Insert, Join, Plan, Saving, Site, Switch, Target,
                                   save_plan, sha256_file)
from cannbot_prefetch.rewrite import helper as helper_mod
from cannbot_prefetch.rewrite.engine import SiteErrors, rewrite_source

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style"
runner = CliRunner()


def _site(sha: str, file: str = "toy_model.py") -> Site:
    return Site(id="toy-down", target=Target(file, "ToyMLP", "down_proj", "self.down_proj.weight"),
                insert=Insert("ToyMLP", "forward", "self.up_proj", "after"), dependency="h",
                join=Join("ToyMLP", "forward", "end"), max_size=1024,
                basis=Basis((16, 32), 4.0, 0.5), ladder={}, mapping="manual", evidence={},
                saving_us=Saving(0, 0, 0), source_sha256=sha, max_tokens=64)


@pytest.fixture()
def project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("toy_model.py", "toy_factory.py"):
        shutil.copyfile(FIX / name, proj / name)
    (proj / "runner.yaml").write_text("model_config:\n  custom_params:\n    batch: 1\n")
    plan = Plan(sites=(_site(sha256_file(proj / "toy_model.py")),),
                switch=Switch(config_path="custom_params.enable_prefetch", config_file="runner.yaml"))
    save_plan(plan, proj / "plan.yaml")
    return proj


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _edit(plan: Path, fn) -> None:
    data = yaml.safe_load(plan.read_text())
    fn(data)
    plan.write_text(yaml.safe_dump(data, sort_keys=False))


def _touch(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


# ---------------------------------------------------------------- S1: verify never evaluates

def test_s1_verify_never_evaluates_weight_expr(project, tmp_path):
    torch = pytest.importorskip("torch")
    from cannbot_prefetch.verify.checks import expected_weights

    marker = tmp_path / "PWNED_S1"
    payload = f"({_touch(marker)}, self.down_proj.weight)[1]"
    sys.path.insert(0, str(project))
    try:
        import toy_model
        model = toy_model.ToyModel(toy_model.ToyConfig())
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("toy_model", None)
    mlp = model.layers[0].mlp
    # the naive path (what verify did): eval with builtins creates the marker
    assert eval(payload, {}, {"self": mlp}) is mlp.down_proj.weight  # noqa: S307
    assert marker.exists()
    marker.unlink()
    # the plan file is refused on load, by verify itself
    _edit(project / "plan.yaml", lambda d: d["sites"][0]["target"].update(weight_expr=payload))
    res = runner.invoke(app, ["prefetch", "verify", str(project / "plan.yaml"),
                              "--factory", str(project / "toy_factory.py") + ":build"])
    assert res.exit_code == 2 and "weight_expr" in res.output
    assert not marker.exists()
    # and a Plan built in memory (no loader in the way) is still never evaluated
    good = Plan(sites=(_site("0" * 64),))
    bad = Plan(sites=(Site(**{**good.sites[0].__dict__,
                              "target": Target("toy_model.py", "ToyMLP", "down_proj", payload)}),))
    exp = expected_weights(model, bad)
    assert exp.per_site == {"toy-down": 0} and not marker.exists()
    assert expected_weights(model, good).per_site == {"toy-down": 2}   # getattr resolves it
    del torch


# ---------------------------------------------------------------- S2: apply never pastes text

class _Stub:
    """Stands for the helper, `self` and modules in the naive snippets: any attribute, any call."""

    def __getattr__(self, name):
        return _Stub()

    def __call__(self, *a, **k):
        return None


CASES = {
    # field path in the YAML, value (marker substituted), naive code that the old code built
    "weight_expr": (("sites", 0, "target", "weight_expr"),
                    "({touch}, self.down_proj.weight)[1]",
                    lambda v: f"_cbp.npu_prefetch(True, {v}, h, 1024)"),
    "id": (("sites", 0, "id"), "toy-down\n        {touch}",
           lambda v: f"if True:\n        _cbp.npu_prefetch(True, w, h, 1024)  # cannbot-prefetch: {v}\n"),
    "switch.name": (("switch", "name"), "x = {touch}; self.enable_prefetch",
                    lambda v: f"self.{v} = _cbp.read_switch(None, 'p')"),
    "switch.config_path (string)": (("switch", "config_path"), 'a"); {touch}; ("',
                                    lambda v: f'x = _cbp.read_switch(None, "{v}")'),
    "switch.config_path (docstring)": (("switch", "config_path"), 'a"""\n{touch}\n"""',
                                       None),   # the helper template, below
    "dependency.expr": (("sites", 0, "dependency", "expr"), "({touch}, h)[1]",
                        lambda v: f"_cbp.npu_prefetch(True, w, {v}, 1024)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_s2_apply_never_writes_plan_text_into_source(project, tmp_path, case):
    keys, template, naive = CASES[case]
    marker = tmp_path / "PWNED_S2"
    value = template.format(touch=_touch(marker))
    # the payload is live: the code the old rewriter built from it creates the marker
    if naive is None:   # the helper as it is written, minus the grammar check
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(helper_mod.grammar, "is_dotted", lambda *a, **k: True)
            code = helper_mod.helper_source("eager", value)
    else:
        code = naive(value)
    exec(compile(code, "naive", "exec"), {"_cbp": _Stub(), "self": _Stub(), "h": 1, "w": 1})  # noqa: S102
    assert marker.exists()
    marker.unlink()

    def put(d):
        node = d
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    _edit(project / "plan.yaml", put)
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2, res.output
    assert f"{keys[-1]}' must be" in res.output
    assert _snapshot(project) == before and not marker.exists()
    # past the loader (a Site built in memory), the rewriter and the helper refuse it too
    site, switch = _site("0" * 64), Switch()
    field = keys[-1]
    if keys[0] == "switch":
        switch = Switch(**{**switch.__dict__, field: value})
        if field == "config_path":
            with pytest.raises(ValueError):
                helper_mod.helper_source("eager", value)
    elif field == "weight_expr":
        site = Site(**{**site.__dict__,
                       "target": Target(**{**site.target.__dict__, "weight_expr": value})})
    elif field == "id":
        site = Site(**{**site.__dict__, "id": value})
    else:
        site = Site(**{**site.__dict__, "dependency": value})
    with pytest.raises(SiteErrors):
        rewrite_source((project / "toy_model.py").read_text(), [site], switch=switch)
    assert not marker.exists()


def test_s2_report_ab_script_takes_only_an_identifier(tmp_path):
    from cannbot_prefetch.report.abscript import ab_script

    marker = tmp_path / "PWNED_AB"
    with pytest.raises(ValueError):
        ab_script("plan.yaml", f'x"""\n{_touch(marker)}\n"""')
    code = ab_script('we"""ird.yaml', "enable_prefetch")
    compile(code, "ab", "exec")
    assert not marker.exists()


# ---------------------------------------------------------------- S3: nothing outside the root

def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    shutil.copyfile(FIX / "toy_model.py", out / "victim.py")
    return out / "victim.py"


def test_s3_empty_hash_refused(project, tmp_path):
    victim = _outside(tmp_path)
    _edit(project / "plan.yaml", lambda d: d["sites"][0].update(
        source_sha256="", target={**d["sites"][0]["target"], "file": "../outside/victim.py"}))
    before = victim.read_bytes()
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "source_sha256" in res.output
    assert victim.read_bytes() == before and not (victim.parent / "_cannbot_prefetch.py").exists()


def test_s3_target_outside_the_root_refused_and_root_is_what_stops_it(project, tmp_path):
    victim = _outside(tmp_path)
    _edit(project / "plan.yaml", lambda d: d["sites"][0].update(
        source_sha256=sha256_file(victim),
        target={**d["sites"][0]["target"], "file": "../outside/victim.py"}))
    before, proj_before = victim.read_bytes(), _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "outside the project root" in res.output
    assert victim.read_bytes() == before and not (victim.parent / "_cannbot_prefetch.py").exists()
    assert _snapshot(project) == proj_before
    # the same plan with a root that holds both is applied: the root is the only guard here
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes",
                              "--root", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert victim.read_bytes() != before and (victim.parent / "_cannbot_prefetch.py").exists()


def test_s3_symlink_out_of_the_root_refused(project, tmp_path):
    victim = _outside(tmp_path)
    (project / "linked.py").symlink_to(victim)
    _edit(project / "plan.yaml", lambda d: d["sites"][0].update(
        source_sha256=sha256_file(victim), target={**d["sites"][0]["target"], "file": "linked.py"}))
    before = victim.read_bytes()
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "outside the project root" in res.output
    assert victim.read_bytes() == before


@pytest.mark.parametrize("config_file", ["../outside/victim.yaml", "/etc/hostname"])
def test_s3_config_file_outside_the_root_refused(project, tmp_path, config_file):
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "victim.yaml").write_text("a: 1\n")
    _edit(project / "plan.yaml", lambda d: d["switch"].update(config_file=config_file))
    before = (outside / "victim.yaml").read_bytes()
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "outside the project root" in res.output
    assert (outside / "victim.yaml").read_bytes() == before


def test_s3_config_path_with_newlines_never_reaches_the_yaml(project):
    _edit(project / "plan.yaml", lambda d: d["switch"].update(
        config_path="enable_prefetch\nevil: true  # cannbot-prefetch: switch"))
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "config_path' must be" in res.output
    assert _snapshot(project) == before


# ---------------------------------------------------------------- issue 33: the project folder and
# every file a plan names are untrusted. Oracles: a marker file that only the payload creates, and
# a snapshot of a folder outside the project that must not change.

def _payload_module(folder: Path, marker: Path, name: str = "evil_model.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    mod = folder / name
    mod.write_text(f"{_touch(marker)}\n")
    return mod


def test_i33_verify_never_imports_a_file_outside_the_root(project, tmp_path):
    pytest.importorskip("torch")
    marker = tmp_path / "PWNED_VERIFY"
    outside = tmp_path / "outside"
    evil = _payload_module(outside, marker)
    (outside / "config.json").write_text('{"model_type": "llama"}')
    # the payload is live: importing the module creates the marker
    import runpy
    runpy.run_path(str(evil))
    assert marker.exists()
    marker.unlink()
    for file in (str(evil), "../outside/evil_model.py"):
        _edit(project / "plan.yaml", lambda d: d["sites"][0]["target"].update(file=file))
        before = _snapshot(outside)
        res = runner.invoke(app, ["prefetch", "verify", str(project / "plan.yaml"),
                                  "--root", str(project)])
        assert res.exit_code == 2 and "outside the project root" in res.output, res.output
        assert "target.file" in res.output
        assert not marker.exists() and _snapshot(outside) == before
        assert str(outside) not in sys.path


def test_i33_verify_never_imports_a_package_init_outside_the_root(tmp_path):
    """A model file inside the root whose folder chain is a package rooted outside it: importing
    it as `pkg.proj.model` would run pkg/__init__.py (outside)."""
    pytest.importorskip("torch")
    from cannbot_prefetch.verify import factory

    marker = tmp_path / "PWNED_INIT"
    pkg = tmp_path / "pkg"
    _payload_module(pkg, marker, "__init__.py")
    proj = pkg / "proj"
    proj.mkdir()
    (proj / "__init__.py").write_text("")
    (proj / "model.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert factory._dotted_on_sys_path(proj / "model.py", proj) is None
        mod = factory.load_model_module(proj / "model.py", {}, proj)
        assert mod.X == 1 and not marker.exists()
    finally:
        sys.path.remove(str(tmp_path))
        for k in [k for k in sys.modules if "_cannbot_verify_model" in k or k.startswith("pkg")]:
            sys.modules.pop(k)
        if str(proj) in sys.path:
            sys.path.remove(str(proj))


@pytest.mark.parametrize("where", ["lock", "state folder", "backup folder", "lock beside the plan"])
def test_i33_state_paths_never_follow_symlinks(project, tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    state = project / ".cannbot-prefetch"
    plan = project / "plan.yaml"
    if where == "lock":
        state.mkdir()
        (state / "lock").symlink_to(outside / "created_lock")     # dangling
    elif where == "state folder":
        state.symlink_to(outside, target_is_directory=True)
    elif where == "backup folder":
        state.mkdir()
        (state / "backup").symlink_to(outside, target_is_directory=True)
    else:   # the plan in its own folder: its lock is out/.cannbot-prefetch/lock
        out = project / "out"
        (out / ".cannbot-prefetch").mkdir(parents=True)
        (out / ".cannbot-prefetch" / "lock").symlink_to(outside / "created_lock")
        shutil.move(plan, out / "plan.yaml")
        plan = out / "plan.yaml"
        _edit(plan, lambda d: d["sites"][0]["target"].update(file="../toy_model.py"))
        _edit(plan, lambda d: d["switch"].update(config_file="../runner.yaml"))
    before_out = _snapshot(outside)
    model_before = (project / "toy_model.py").read_bytes()
    res = runner.invoke(app, ["prefetch", "apply", str(plan), "--write", "--yes",
                              "--root", str(project)])
    assert res.exit_code == 2, res.output
    assert ("symlink" in res.output) and ".cannbot-prefetch" in res.output
    assert _snapshot(outside) == before_out and not (outside / "created_lock").exists()
    assert not list(outside.glob("*.bak"))
    assert (project / "toy_model.py").read_bytes() == model_before


def test_i33_backups_keep_the_first_original(project):
    original = (project / "toy_model.py").read_bytes()
    plan = str(project / "plan.yaml")
    for _ in range(3):   # apply, revert, apply ... within one second: every backup kept
        root = ["--root", str(project)]
        assert runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes", *root]).exit_code == 0
        assert runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--write", "--yes",
                                   *root]).exit_code == 0
    backups = sorted((project / ".cannbot-prefetch" / "backup").glob("toy_model.py.*.bak"))
    assert len(backups) == 6
    assert sum(b.read_bytes() == original for b in backups) == 3


@pytest.mark.parametrize("key", ["core.fsmonitor", "filter"])
def test_i33_dry_run_never_runs_a_command_from_git_config(project, tmp_path, key):
    import subprocess
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    marker = tmp_path / f"PWNED_GIT_{key}"
    script = tmp_path / "cmd.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)

    def git(*a):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *a], cwd=project,
                       capture_output=True, check=True)
    git("init", "-q")
    git("add", "toy_model.py")
    git("commit", "-q", "-m", "x")
    if key == "filter":
        git("config", "filter.evil.clean", str(script))
        (project / ".gitattributes").write_text("*.py filter=evil\n")
    else:
        git("config", "core.fsmonitor", str(script))
    # the payload is live: a plain `git status` runs it
    subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True)
    if key == "filter":   # a clean filter runs when git must read the file's content
        (project / "toy_model.py").touch()
        subprocess.run(["git", "add", "-n", "toy_model.py"], cwd=project, capture_output=True)
    assert marker.exists()
    marker.unlink()
    (project / "toy_model.py").write_text((project / "toy_model.py").read_text() + "\n")
    _edit(project / "plan.yaml", lambda d: d["sites"][0].update(
        source_sha256=sha256_file(project / "toy_model.py")))
    root = ["--root", str(project)]
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), *root])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes",
                              *root])
    assert res.exit_code == 0, res.output
    assert not marker.exists()
