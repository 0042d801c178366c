"""`cannbot prefetch apply` through the CLI: dry run, --check, --write (confirmation), --json,
--revert, the config YAML key, bad input (exit 2, nothing touched), failure half-way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.plan import Basis, Insert, Join, Plan, Saving, Site, Switch, Target, load_plan, \
    save_plan, sha256_file

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style"
runner = CliRunner()


def _site(id, cls, attr, weight, icls, anchor, dep, position="before", sha="", method="forward",
          size=1024, file="toy_model.py"):
    return Site(id=id, target=Target(file, cls, attr, weight), insert=Insert(icls, method, anchor, position),
                dependency=dep, join=Join(icls, method, "end"), max_size=size,
                basis=Basis((32, 16), 4.0, 0.5), ladder={"up": [0.7], "down": [0.3]}, mapping="manual",
                evidence={}, saving_us=Saving(0.1, 0.2, 0.3), source_sha256=sha, max_tokens=64)


@pytest.fixture()
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)           # apply's default root: the folder it runs in
    shutil.copyfile(FIX / "toy_model.py", tmp_path / "toy_model.py")
    shutil.copyfile(FIX / "toy_factory.py", tmp_path / "toy_factory.py")
    (tmp_path / "runner.yaml").write_text("model_config:\n  custom_params:\n    batch: 1\n")
    sha = sha256_file(tmp_path / "toy_model.py")
    plan = Plan(sites=(
        _site("toy-up", "ToyMLP", "up_proj", "self.mlp.up_proj.weight", "ToyLayer", "self.mlp", "h", sha=sha),
        _site("toy-down", "ToyMLP", "down_proj", "self.down_proj.weight", "ToyMLP", "self.up_proj", "h",
              position="after", sha=sha),
    ), mode="eager", switch=Switch(config_path="custom_params.enable_prefetch", config_file="runner.yaml"))
    save_plan(plan, tmp_path / "plan.yaml")
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_dry_run_shows_diff_and_writes_nothing(project):
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml")])
    assert res.exit_code == 0, res.output
    assert "cannbot-prefetch: toy-up" in res.output and "toy-down" in res.output
    assert "nothing written" in res.output
    assert _snapshot(project) == before


def test_check_exits_1_when_pending_then_0_after_write(project):
    plan = str(project / "plan.yaml")
    assert runner.invoke(app, ["prefetch", "apply", plan, "--check"]).exit_code == 1
    res = runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"])
    assert res.exit_code == 0, res.output
    assert (project / "_cannbot_prefetch.py").is_file()
    assert list((project / ".cannbot-prefetch" / "backup").glob("toy_model.py.*.bak"))
    assert load_plan(plan).status == "applied"
    yaml_text = (project / "runner.yaml").read_text()
    assert "    enable_prefetch: false  # cannbot-prefetch: switch" in yaml_text
    assert runner.invoke(app, ["prefetch", "apply", plan, "--check"]).exit_code == 0
    code = (project / "toy_model.py").read_text()
    compile(code, "toy_model.py", "exec")
    assert 'read_switch(config, "custom_params.enable_prefetch")' in code


def test_write_without_terminal_needs_yes(project):
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write"])
    assert res.exit_code == 2 and "--yes" in res.output
    assert _snapshot(project) == before


def test_json_result(project):
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["pending"] is True and data["applied"] == ["toy-up", "toy-down"]
    kinds = {f["kind"]: f["status"] for f in data["files"]}
    assert kinds == {"model": "changed", "helper": "changed", "config": "changed"}


def test_revert_by_markers_keeps_user_edits(project):
    plan = str(project / "plan.yaml")
    original = (project / "toy_model.py").read_text()
    assert runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"]).exit_code == 0
    edited = (project / "toy_model.py").read_text().replace("class ToyModel(nn.Module):",
                                                            "class ToyModel(nn.Module):  # user note")
    (project / "toy_model.py").write_text(edited)
    res = runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--write", "--yes"])
    assert res.exit_code == 0, res.output
    assert (project / "toy_model.py").read_text() == original.replace(
        "class ToyModel(nn.Module):", "class ToyModel(nn.Module):  # user note")
    assert not (project / "_cannbot_prefetch.py").exists()
    assert "enable_prefetch" not in (project / "runner.yaml").read_text()
    assert load_plan(plan).status == "proposed"


def test_changed_source_refused(project):
    (project / "toy_model.py").write_text((project / "toy_model.py").read_text() + "\n# edited\n")
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code == 2 and "changed since the plan was made" in res.output
    assert _snapshot(project) == before


@pytest.mark.parametrize("mutate, words", [
    (lambda p: p.replace("class: ToyMLP", "class: NoSuchMLP", 1), "target class NoSuchMLP"),
    (lambda p: p.replace("attr: up_proj", "attr: side_proj", 1), "no attribute 'side_proj'"),
    (lambda p: p.replace("expr: h\n", "expr: nothing_here\n", 1), "'nothing_here' is not defined"),
    (lambda p: p.replace("max_size: 1024", "max_size: -1", 1), "max_size"),
    (lambda p: p.replace("file: toy_model.py", "file: missing.py", 1), "model source not found"),
])
def test_bad_input_exit_2_names_file_and_site(project, mutate, words):
    plan = project / "plan.yaml"
    plan.write_text(mutate(plan.read_text()))
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(plan), "--write", "--yes"])
    assert res.exit_code == 2, res.output
    assert words in res.output
    assert "toy" in res.output or "missing.py" in res.output or "plan.yaml" in res.output
    assert _snapshot(project) == before


def test_unparsable_source_exit_2(project):
    (project / "toy_model.py").write_text("def broken(:\n")
    plan = project / "plan.yaml"
    old = load_plan(plan).sites[0].source_sha256
    plan.write_text(plan.read_text().replace(old, sha256_file(project / "toy_model.py")))
    res = runner.invoke(app, ["prefetch", "apply", str(plan)])
    assert res.exit_code == 2 and "does not parse" in res.output and "toy-up" in res.output


def test_failure_half_way_leaves_every_file(project, monkeypatch):
    from cannbot_prefetch.rewrite import write

    before = _snapshot(project)
    calls = {"n": 0}
    real = write.write_atomic

    def flaky(path, text):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        real(path, text)

    monkeypatch.setattr(write, "write_atomic", flaky)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes"])
    assert res.exit_code != 0
    after = {k: v for k, v in _snapshot(project).items() if not k.startswith(".cannbot-prefetch")}
    assert after == before


def test_dirty_git_tree_warns(project):
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")

    def git(*a):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *a], cwd=project,
                       capture_output=True, check=True)

    current = (project / "toy_model.py").read_text()
    git("init", "-q")
    git("add", "toy_model.py")
    git("commit", "-q", "-m", "x")
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml")])
    assert res.exit_code == 0 and "uncommitted" not in res.output
    # the planned file is not what git has: committed an older version
    (project / "toy_model.py").write_text(current.replace("bias=False", "bias=True"))
    git("commit", "-q", "-am", "older")
    (project / "toy_model.py").write_text(current)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml")])
    assert res.exit_code == 0 and "uncommitted changes in git" in res.output


def test_helper_elsewhere_imported_by_name(project):
    (project / "lib").mkdir()
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write", "--yes",
                              "--helper", str(project / "lib" / "prefetch_helper.py")])
    assert res.exit_code == 0, res.output
    assert "keep" in res.output and "sys.path" in res.output
    code = (project / "toy_model.py").read_text()
    assert "import prefetch_helper as _cbp  # cannbot-prefetch: import" in code
    assert (project / "lib" / "prefetch_helper.py").is_file()


def test_revert_from_backup_when_markers_are_gone(project):
    plan = str(project / "plan.yaml")
    original = (project / "toy_model.py").read_text()
    assert runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"]).exit_code == 0
    # someone reformatted the file and dropped the marker comments
    code = (project / "toy_model.py").read_text().replace("  # cannbot-prefetch: ", "  # was: ")
    (project / "toy_model.py").write_text(code)
    res = runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--write", "--yes"])
    assert res.exit_code == 0, res.output
    assert (project / "toy_model.py").read_text() == original


# ------------------------------------------------------------------ what a newcomer sees (issue 9)
def test_dry_run_says_would_apply(project):
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml")])
    assert res.exit_code == 0
    assert "would apply" in res.stdout and " applied " not in res.stdout


def test_write_shows_table_and_diff_before_asking(project, monkeypatch):
    from cannbot_prefetch.cli import apply as apply_cli

    monkeypatch.setattr(apply_cli, "_interactive", lambda: True)
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write"],
                        input="n\n")
    assert res.exit_code == 0, res.output
    out = res.output
    ask = out.index("Write these changes to 3 file(s)?")
    assert out.index("Prefetch design") < ask            # the design table first
    assert out.index("+++ b/toy_model.py") < ask         # then the diff
    assert out.index("helper module") < ask
    assert "nothing written" in out[ask:]
    assert _snapshot(project) == before


def test_a_closed_prompt_aborts_in_the_asked_language(project, monkeypatch):
    """Input ends at the question (Click raises Abort): one line in --lang, exit 1, nothing
    written; the root finds the language on the Click context (cli/context.py)."""
    from cannbot_prefetch.cli import apply as apply_cli

    monkeypatch.setattr(apply_cli, "_interactive", lambda: True)
    before = _snapshot(project)
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--write",
                              "--lang", "zh"], input="")
    assert res.exit_code == 1, res.output
    assert res.stderr.strip().endswith("]:已中止：未写入任何文件")   # after the question
    assert _snapshot(project) == before


def test_check_with_pending_changes_is_exit_1_not_an_error(project):
    res = runner.invoke(app, ["prefetch", "apply", str(project / "plan.yaml"), "--check"])
    assert res.exit_code == 1
    assert "3 file(s) would change" in res.stderr
    assert "error" not in res.stderr.lower()


def test_json_flags_are_consistent_and_helper_is_summarised(project):
    plan = str(project / "plan.yaml")
    dry = json.loads(runner.invoke(app, ["prefetch", "apply", plan, "--json"]).stdout)
    assert dry["pending"] is True and dry["written"] is False
    assert len(dry["changed_files"]) == 3
    helper = next(f for f in dry["files"] if f["kind"] == "helper")
    assert helper["diff"] == "" and helper["helper"]["action"] == "write"
    assert helper["helper"]["lines"] > 20 and len(helper["helper"]["sha256"]) == 64
    model = next(f for f in dry["files"] if f["kind"] == "model")
    assert "+++ b/toy_model.py" in model["diff"]
    res = runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes", "--json"])
    wrote = json.loads(res.stdout)
    assert wrote["pending"] is False and wrote["written"] is True and wrote["backups"]
    again = json.loads(runner.invoke(app, ["prefetch", "apply", plan, "--json"]).stdout)
    assert again["pending"] is False and again["written"] is False and again["changed_files"] == []


def test_revert_alone_reverts(project):
    plan = str(project / "plan.yaml")
    original = (project / "toy_model.py").read_text()
    assert runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"]).exit_code == 0
    preview = runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--check"])
    assert preview.exit_code == 1 and "would be reverted" in preview.stderr
    assert "would remove" in preview.stdout
    assert (project / "toy_model.py").read_text() != original
    res = runner.invoke(app, ["prefetch", "apply", plan, "--revert"])
    assert res.exit_code == 0, res.output
    assert "reverted 3 file(s)" in res.stderr
    assert (project / "toy_model.py").read_text() == original
    assert not (project / "_cannbot_prefetch.py").exists()
    assert runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--check"]).exit_code == 0


@pytest.fixture()
def installed(tmp_path, monkeypatch):
    """The same project, but lying inside a site-packages folder (as the Quick start's
    `--model-src transformers.models...` plan would), apply run from the venv."""
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "toypkg"
    pkg.mkdir(parents=True)
    shutil.copyfile(FIX / "toy_model.py", pkg / "toy_model.py")
    sha = sha256_file(pkg / "toy_model.py")
    plan = Plan(sites=(
        _site("toy-up", "ToyMLP", "up_proj", "self.mlp.up_proj.weight", "ToyLayer", "self.mlp", "h",
              sha=sha),), mode="eager",
        switch=Switch(config_path="custom_params.enable_prefetch"))
    save_plan(plan, pkg / "plan.yaml")
    return pkg


def test_site_packages_refused_unless_allowed(installed):
    plan = str(installed / "plan.yaml")
    before = _snapshot(installed)
    dry = runner.invoke(app, ["prefetch", "apply", plan])
    assert dry.exit_code == 0 and "--allow-installed" in dry.stderr
    res = runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"])
    assert res.exit_code == 2
    assert "installed package" in res.stderr and "site-packages" in res.stderr
    assert f"cp {installed / 'toy_model.py'} ./toy_model.py" in res.stderr
    assert "--model-src ./toy_model.py" in res.stderr
    assert _snapshot(installed) == before
    js = runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes", "--json"])
    assert js.exit_code == 2 and json.loads(js.stdout)["error"]["path"].endswith("toy_model.py")
    ok = runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes", "--allow-installed"])
    assert ok.exit_code == 0, ok.output
    assert "cannbot-prefetch: toy-up" in (installed / "toy_model.py").read_text()


def test_installed_location_and_unwritable(tmp_path, monkeypatch):
    import os

    from cannbot_prefetch.rewrite import installed as mod

    assert mod.installed_location(tmp_path / "model.py") is None
    sp = tmp_path / "lib" / "dist-packages" / "pkg" / "m.py"
    assert mod.installed_location(sp) == str(tmp_path / "lib" / "dist-packages")
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    assert mod.unwritable(target) is None
    monkeypatch.setattr(os, "access", lambda p, mode: False)
    assert "not writable" in mod.unwritable(target)
    assert "not writable" in mod.unwritable(tmp_path / "new" / "helper.py")


def test_status_says_what_the_files_hold(project):
    """Issue 34: a dry run's JSON status is not `applied` (nothing was written), and
    `apply --check` on an applied plan says "applied" for its sites, not "would apply"."""
    plan = str(project / "plan.yaml")
    dry = json.loads(runner.invoke(app, ["prefetch", "apply", plan, "--json"]).stdout)
    assert (dry["pending"], dry["written"], dry["status"]) == (True, False, "proposed")
    assert runner.invoke(app, ["prefetch", "apply", plan, "--write", "--yes"]).exit_code == 0
    res = runner.invoke(app, ["prefetch", "apply", plan, "--check"])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.stdout.splitlines() if "toy-up" in ln or "toy-down" in ln]
    assert len(rows) == 2 and all(ln.rstrip().endswith("applied") for ln in rows), rows
    assert "would apply" not in res.stdout
    again = json.loads(runner.invoke(app, ["prefetch", "apply", plan, "--json"]).stdout)
    assert (again["pending"], again["status"]) == (False, "applied")
    undo = json.loads(runner.invoke(app, ["prefetch", "apply", plan, "--revert", "--check",
                                          "--json"]).stdout)
    assert (undo["pending"], undo["status"]) == (True, "applied")


def test_default_root_is_where_apply_runs_never_the_plans_folder(tmp_path, monkeypatch):
    """Issue 34: `analyze --out out/x` puts the plan beside the model, not above it; apply run
    from the project (no git) takes the current folder as the root, so the plan's `../..`
    model file is inside it. Run from inside out/x, the same plan is refused: the root is
    never widened to reach what the plan names."""
    shutil.copyfile(FIX / "toy_model.py", tmp_path / "toy_model.py")
    sha = sha256_file(tmp_path / "toy_model.py")
    out = tmp_path / "out" / "x"
    out.mkdir(parents=True)
    save_plan(Plan(sites=(_site("toy-up", "ToyMLP", "up_proj", "self.mlp.up_proj.weight",
                                "ToyLayer", "self.mlp", "h", sha=sha,
                                file="../../toy_model.py"),)), out / "plan.yaml")
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["prefetch", "apply", "out/x/plan.yaml", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["root"] == str(tmp_path.resolve()) and doc["applied"] == ["toy-up"]
    monkeypatch.chdir(out)
    res = runner.invoke(app, ["prefetch", "apply", "plan.yaml"])
    assert res.exit_code == 2 and "outside the project root" in res.output
