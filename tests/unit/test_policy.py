"""The policy is one frozen value built where a run starts and passed down (issue 34 part 2).

Static: `Policy.load` is named only by the starts listed in docs/architecture.md "The policy"
(START below), and nothing reads configs/policy.yaml another way. At run time: one analysis,
one report, reads the file once, and a changed policy given to the start reaches the stages."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

import cannbot_prefetch as cp
from cannbot_prefetch import policy as policy_mod
from cannbot_prefetch.errors import InputError
from cannbot_prefetch.policy import Policy

SRC = Path(cp.__file__).resolve().parent
REPO = SRC.parent.parent
LLAMA = REPO / "examples" / "llama3.2-1b-en"

# (module, function or class) that may build the policy: the library's and the commands' starts,
# and the public stage functions a caller may run alone (None: the shipped policy)
START = {
    ("api/analysis.py", "Analysis"),            # Analysis.load, and the field's default
    ("profiling/load.py", "load_profile"),
    ("roofline/classify.py", "classify"),
    ("windows/find.py", "find_windows"),
    ("plan/build.py", "build_plan"),
    ("plan/build.py", "target_windows"),
    ("plan/validate.py", "_created_from"),      # a plan read alone (apply): its override bounds
    ("hardware/profiles.py", "from_dict"),      # a profile file without cmo_bw_gbps
    ("hardware/profiles.py", "resolve"),        # detection by cores and MHz
    ("hardware/calibration.py", "measure_host"),
    ("report/run.py", "read_report"),
    ("verify/factory.py", "build"),
    ("mapping/source.py", "load_model_source"),  # the model source read alone (its tables)
}


def _policy_loads(tree: ast.AST):
    """(top-level def or class name, line) of every `Policy.load` a module names."""
    for top in tree.body:
        for node in ast.walk(top):
            if isinstance(node, ast.Attribute) and node.attr == "load" \
                    and isinstance(node.value, ast.Name) and node.value.id == "Policy":
                yield getattr(top, "name", "<module>"), node.lineno


def test_only_the_starts_build_the_policy():
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "policy.py":
            continue
        for owner, line in _policy_loads(ast.parse(path.read_text(encoding="utf-8"))):
            assert (rel, owner) in START, f"{rel}:{line} builds the policy inside {owner}"
            found.add((rel, owner))
    assert found == START      # a start that no longer builds one leaves the list


def test_nothing_reads_policy_yaml_another_way():
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(SRC).as_posix()
        if rel != "policy.py":
            assert '"policy.yaml"' not in text and "'policy.yaml'" not in text, rel
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                assert name != "policy" or node.args or node.keywords, \
                    f"{rel}:{node.lineno} calls policy() (a global read)"


def test_policy_is_frozen_and_read_only():
    pol = Policy.load()
    with pytest.raises(AttributeError):
        pol.sizing = {}                                  # type: ignore[misc]
    with pytest.raises(TypeError):
        pol["sizing"]["coefficient"] = 1.0               # type: ignore[index]
    assert isinstance(pol.verify["tiny_model"]["caps"], MappingProxyType)
    assert pol["sizing"]["ladder_up"] == (0.7, 1.0)      # configs/policy.yaml sizing.ladder_up
    with pytest.raises(KeyError):
        pol["no_such_section"]


def test_a_policy_file_without_a_section_names_the_file_and_section(tmp_path):
    bad = tmp_path / "policy.yaml"
    bad.write_text("verdict: {ridge_margin: 2.0}\n", encoding="utf-8")
    with pytest.raises(InputError, match="section 'report'") as info:
        Policy.load(bad)
    assert info.value.path == str(bad)


@pytest.fixture
def loads(monkeypatch):
    """Counts the policy files read."""
    n = [0]
    real = Policy.load.__func__

    def counting(cls, path=None):
        n[0] += 1
        return real(cls, path)
    monkeypatch.setattr(policy_mod.Policy, "load", classmethod(counting))
    return n


def test_one_analysis_reads_the_policy_once(loads, tmp_path):
    pytest.importorskip("transformers")
    planned = cp.analyze(str(LLAMA / "profile"), model_src="transformers.models.llama.modeling_llama",
                         model_config=str(LLAMA / "config.json"), out=str(tmp_path / "out"))
    assert planned.plan.sites and loads[0] == 1
    planned.analysis.windows()
    planned.analysis.shortlist()
    assert loads[0] == 1


def test_the_policy_given_to_the_start_reaches_the_windows(loads):
    shipped = Policy.load()
    a = cp.Analysis.load(str(LLAMA / "profile"), policy=shipped)
    assert a.windows().candidates
    # a window shorter than 10 s is too short under this policy: no stage reads another one
    strict = replace(shipped, windows={**shipped.windows, "min_window_us": 1e7})
    b = cp.Analysis.load(str(LLAMA / "profile"), policy=strict)
    assert b.policy is strict and not b.windows().candidates
    assert loads[0] == 1          # only the `shipped` above


# Module-level caches and module state: none (tests/unit/test_no_module_state.py scans for
# them); the shipped tables are sections of the Policy, see test_an_edited_table_is_read_by_the_next_call.


def test_an_edited_table_is_read_by_the_next_call(tmp_path, monkeypatch):
    """A user who edits configs/op_classes.yaml between two library calls in one process sees
    the edit: the tables are read where each analysis starts, never kept at module level.
    The example profile (GENERATED, examples/llama3.2-1b-en) has 5 MatMulV3 signatures; with
    MatMulV3 among `exclude_types` it has none."""
    import shutil
    from cannbot_prefetch import settings

    configs = tmp_path / "configs"
    shutil.copytree(settings.configs_dir(), configs)
    monkeypatch.setattr(settings, "configs_dir", lambda: configs)
    first = cp.Analysis.load(str(LLAMA / "profile"))
    assert [(s.type, s.family) for s in first.signatures] == [("MatMulV3", "matmul")] * 5
    table = configs / "op_classes.yaml"
    text = table.read_text(encoding="utf-8")
    assert text.count("exclude_types: [MemSet, '0']") == 1
    table.write_text(text.replace("exclude_types: [MemSet, '0']",
                                  "exclude_types: [MemSet, '0', MatMulV3]"), encoding="utf-8")
    assert cp.Analysis.load(str(LLAMA / "profile")).signatures == ()
