"""The agent skills cannot rot: front matter and evals validate, links resolve, and every
`cannbot ...` command, sub-command and `--flag` a skill (or our docs) mentions exists in the CLI.

A command that is still a "not built yet" stub is skipped with the reason (only while the
project is being built); a negative test proves that a made-up flag or sub-command is caught.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import skillcheck as sc  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SKILLS = sorted(p.parent for p in (REPO / "skills").glob("*/SKILL.md"))
EXPECTED_SKILLS = {"model-infer-prefetch", "npu-roofline-analysis"}
# Texts whose command lines are checked: the skills with their references, the docs pages, the
# README and the examples' READMEs (a newcomer copies their commands).
TEXTS = sorted({REPO / "skills" / "README.md", *(REPO / "skills").glob("*/SKILL.md"), *(REPO / "skills").glob("*/references/*.md"),
                *(REPO / "docs").glob("*.md"), REPO / "README.md", *(REPO / "examples").glob("*/README.md")}
               - {REPO / "README.md"} | ({REPO / "README.md"} if (REPO / "README.md").exists() else set()))


@pytest.fixture(scope="module")
def tree() -> sc.CliTree:
    return sc.load_tree()


def _rel(p: Path) -> str:
    return str(p.relative_to(REPO))


def test_both_skills_exist():
    assert EXPECTED_SKILLS <= {p.name for p in SKILLS}


@pytest.mark.parametrize("skill", SKILLS, ids=lambda p: p.name)
def test_front_matter(skill):
    assert sc.front_matter_errors(skill) == []


@pytest.mark.parametrize("skill", SKILLS, ids=lambda p: p.name)
def test_evals_json(skill):
    assert sc.evals_errors(skill) == []


@pytest.mark.parametrize("md", TEXTS, ids=_rel)
def test_links_resolve(md):
    assert sc.link_errors(md) == []


@pytest.mark.parametrize("md", TEXTS, ids=_rel)
def test_every_command_and_flag_exists(tree, md):
    # Skills: every --flag anywhere must be ours. Docs and example READMEs also mention the
    # flags of scripts (run.py --small), so only their `cannbot ...` command lines are checked.
    in_skill = md.is_relative_to(REPO / "skills")
    errors, skipped = sc.check_text(tree, md.read_text(encoding="utf-8"), _rel(md), prose=in_skill)
    assert errors == []
    if skipped:
        pytest.skip("; ".join(skipped[:3]) + (f" (+{len(skipped) - 3} more)" if len(skipped) > 3 else ""))


def test_prefetch_skill_uses_every_workflow_command():
    """An agent reading only the prefetch skill must find every command of the workflow."""
    text = (REPO / "skills" / "model-infer-prefetch" / "SKILL.md").read_text(encoding="utf-8")
    cmds = [c for _, c in sc.command_lines(text)]
    for sub in ("analyze", "apply", "verify", "report"):
        assert any(c.startswith(f"cannbot prefetch {sub}") for c in cmds), sub
    joined = "\n".join(cmds)
    for needed in ("--json", "--model-src", "--model-config", "--out", "--target", "--window",
                   "--write", "--yes", "--check", "--revert", "--factory", "--baseline",
                   "--optimized", "--verify-result"):
        assert needed in joined, needed
    for word in ("prefetch_design.md", "prefetch_plan.next.yaml", "run_prefetch_ab.py", "report.md",
                 "no_safe_window", "--target", "退出码"):
        assert word in text, word


def test_json_keys_named_by_the_skills_exist_in_the_analyze_schema():
    """Top-level and signature keys the skills tell the agent to read are in the shipped schema."""
    spec = importlib.util.find_spec("cannbot_prefetch")
    schema_path = Path(spec.origin).parent / "schemas" / "analyze.schema.json"
    if not schema_path.exists():
        pytest.skip(f"no analyze schema at {schema_path}")
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    top = set(schema.get("properties", {}))
    sig = set(schema["properties"]["signatures"]["items"].get("properties", {}))
    for key in ("profile", "hardware", "signatures", "candidates", "rejections", "notes"):
        assert key in top, key
    for key in ("verdict", "measured_verdict", "note", "ai", "ridge", "t_compute_us",
                "t_memory_us", "weight_bytes", "share", "total_us", "mean_us"):
        assert key in sig, key


def test_reason_codes_named_by_the_skill_exist():
    import re

    from cannbot_prefetch import reasons

    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    text = (REPO / "skills" / "model-infer-prefetch" / "SKILL.md").read_text(encoding="utf-8")
    table = text[text.index("### 1.3"):text.index("### 1.4")]
    named = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)) - {"reason_code"}
    assert named and named <= codes, named - codes


def test_cli_reference_lists_every_command_and_option(tree):
    """docs/cli.md (generated) names every command and option; regenerate it when this fails:
    python docs/gen_cli_reference.py"""
    for path in (REPO / "docs" / "cli.md",
                 REPO / "skills" / "model-infer-prefetch" / "references" / "cli.md"):
        text = path.read_text(encoding="utf-8")
        for cmd_path, opts in tree.options.items():
            if cmd_path in tree.groups or cmd_path in tree.unbuilt:
                continue
            assert f"`{' '.join(cmd_path)}`" in text, (path.name, cmd_path)
            for o in opts - {"--help"}:
                assert f"`{o}`" in text, (path.name, cmd_path, o)


# ---------------------------------------------------------------------------------- negative
BAD_SKILL = """---
name: bad-skill
description: test
user-invocable: true
---
# bad

```bash
cannbot prefetch analyze PROFILE --json --no-such-flag
cannbot prefetch frobnicate PLAN
cannbot prefetch hardware show 910B3 --nope
```

Then run `cannbot prefetch report --plan P --baseline B --bogus-inline`.
Finally pass `--made-up-prose` somewhere. `msprof --aic-metrics=PipeUtilization` is another tool.
"""


def test_negative_made_up_flags_and_commands_are_caught(tree):
    errors, _ = sc.check_text(tree, BAD_SKILL, "bad")
    text = "\n".join(errors)
    assert "--no-such-flag" in text
    assert "frobnicate" in text
    assert "--nope" in text
    assert "--bogus-inline" in text
    assert "--made-up-prose" in text
    assert "--aic-metrics" not in text          # another tool's flag is not ours to check
    assert not any(e.rstrip().endswith("no option --json") or "no option --json " in e
                   for e in errors)                 # real flags pass


def test_negative_temporary_skill_folder(tree, tmp_path):
    skill = tmp_path / "bad-skill"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text(BAD_SKILL.replace("name: bad-skill", "name: Bad_Skill"),
                                    encoding="utf-8")
    (skill / "evals" / "evals.json").write_text(json.dumps({"evals": []}), encoding="utf-8")
    fm = sc.front_matter_errors(skill)
    assert any("folder name" in e for e in fm) and any("kebab-case" in e for e in fm)
    assert sc.evals_errors(skill)
    long = BAD_SKILL.replace("description: test", "description: " + "x" * 1025)
    (skill / "SKILL.md").write_text(long.replace("name: bad-skill", "name: bad-skill"), encoding="utf-8")
    assert any("1024" in e for e in sc.front_matter_errors(skill))
    errors, _ = sc.check_text(tree, (skill / "SKILL.md").read_text(encoding="utf-8"), "tmp")
    assert len(errors) >= 5


def test_negative_real_skill_with_one_flag_renamed(tree):
    """Mutating one real flag in the real skill text makes the check fail."""
    text = (REPO / "skills" / "model-infer-prefetch" / "SKILL.md").read_text(encoding="utf-8")
    assert sc.check_text(tree, text, "ok")[0] == []
    broken = text.replace("--model-config", "--model-cfg", 1)
    errors, _ = sc.check_text(tree, broken, "broken")
    assert any("--model-cfg" in e for e in errors)


def test_generator_check_mode_runs():
    proc = subprocess.run([sys.executable, str(REPO / "docs" / "gen_cli_reference.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr


def test_report_actions_named_by_the_skill_exist():
    import re

    from cannbot_prefetch.report.rules import ACTIONS

    text = (REPO / "skills" / "model-infer-prefetch" / "SKILL.md").read_text(encoding="utf-8")
    table = text[text.index("## 第五步"):text.index("## 输出要求")]
    named = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)) - {"action"}
    assert named == set(ACTIONS)


def test_shell_pipes_and_placeholders_are_not_commands(tree):
    text = "Run `cannbot ... | head` or `cannbot prefetch analyze P --json | jq .notes` or\n" \
           "`cannbot prefetch hardware list > out.txt`."
    assert sc.check_text(tree, text, "pipes") == ([], [])
    bad = "`cannbot prefetch analyze P --jsn | jq .`"
    assert any("--jsn" in e for e in sc.check_text(tree, bad, "pipes")[0])


def test_verify_check_names_named_by_the_skill_exist():
    import re

    import cannbot_prefetch.verify.capture as capture
    import cannbot_prefetch.verify.checks as checks
    import cannbot_prefetch.verify.runner as runner

    src = "".join(Path(m.__file__).read_text(encoding="utf-8") for m in (checks, runner, capture))
    real = set(re.findall(r'Check\(\s*"([^"]+)"', src))
    text = (REPO / "skills" / "model-infer-prefetch" / "SKILL.md").read_text(encoding="utf-8")
    section = text[text.index("### 4.1"):text.index("### 4.2")]
    listed = section[section.index("检查项："):]
    listed = listed[:listed.index("。")]
    named = set(re.findall(r"`([^`]+)`（", listed))
    assert named and named <= real, named - real
