"""CLI conventions every command keeps (CONTRACTS.md "Commands", docs/cli.md):

`-h` and `--version`; with `--json` every failure (usage errors included) is one JSON error
object on stdout with `code` = the exit code; `--lang zh` reaches errors; a closed pipe exits 0;
progress only on a terminal; `--model-src` module names resolve without importing the package.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cannbot_prefetch import __version__
from cannbot_prefetch.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "llama3.2-1b-en"
runner = CliRunner()


def _commands():
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, path + [name])

    walk(root, [])
    return out


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "cannbot")
def test_dash_h_is_help_everywhere(path):
    res = runner.invoke(app, path + ["-h"])
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output


def test_version():
    for args in (["--version"], ["prefetch", "--version"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and res.stdout.strip() == f"cannbot-prefetch {__version__}"


# One failing invocation per command: usage errors (unknown option, bad --lang, missing
# argument) and unusable input (a file that does not exist).
FAILURES = [
    (["prefetch", "analyze", "--no-such-flag"], 2, "usage"),
    (["prefetch", "analyze", str(EXAMPLE / "profile"), "--lang", "fr"], 2, "usage"),
    (["prefetch", "analyze", "/no/such/profile"], 2, "input_error"),
    (["prefetch", "analyze", str(EXAMPLE / "profile"), "--steps", "5:2"], 2, "input_error"),
    (["prefetch", "apply"], 2, "usage"),
    (["prefetch", "apply", "/no/such/plan.yaml"], 2, None),
    (["prefetch", "verify"], 2, "usage"),                                  # PLAN missing
    (["prefetch", "verify", "/no/such/plan.yaml"], 2, None),
    (["prefetch", "report", "--plan", "/no/such/plan.yaml"], 2, None),
    (["prefetch", "hardware", "show", "no-such-part"], 2, "input_error"),
    (["prefetch", "hardware", "list", "--bogus"], 2, "usage"),
]


@pytest.mark.parametrize("args, code, kind", FAILURES, ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_json_failure_is_one_error_object_on_stdout(args, code, kind):
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == code, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"error"}
    err = doc["error"]
    assert err["code"] == code and err["message"] and "\n" not in err["message"]
    if kind is not None:
        assert err["kind"] == kind
    assert res.stderr.strip() and len(res.stderr.strip().splitlines()) == 1


def test_usage_error_without_json_is_one_line_and_nothing_on_stdout():
    res = runner.invoke(app, ["prefetch", "analyze", "--no-such-flag"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("error: No such option: --no-such-flag")


def test_lang_zh_reaches_errors():
    res = runner.invoke(app, ["prefetch", "analyze", str(EXAMPLE / "profile"), "--steps", "5:2",
                              "--lang", "zh"])
    assert res.exit_code == 2
    assert res.stderr.startswith("错误：") and "结束步在开始步之前" in res.stderr


# Usage errors Click raises before the command's values exist: --json and --lang still reach
# them, wherever they stand (issue 34: Click's own parser records them, cli/context.py).
@pytest.mark.parametrize("args, where", [
    (["prefetch", "analyze", "--no-such-flag"], "cannbot prefetch analyze"),      # unknown option
    (["prefetch", "analyz"], "cannbot prefetch"),                                 # unknown command
    (["prefetch", "hardware", "lisst"], "cannbot prefetch hardware"),
    (["--bogus", "prefetch"], "cannbot"),                                        # at the root
    (["prefetch", "apply"], "cannbot prefetch apply"),                            # missing argument
    (["prefetch", "hardware", "list", "--bogus=3"], "cannbot prefetch hardware list"),
], ids=["option", "command", "hardware command", "root", "missing", "option=value"])
@pytest.mark.parametrize("at", ["end", "after the command"])
def test_usage_errors_keep_json_and_lang(args, where, at):
    extra = ["--json", "--lang", "zh"]
    n = len(where.split()) - 1                 # the words that name the command
    words = args + extra if at == "end" else args[:n] + extra + args[n:]
    res = runner.invoke(app, words, prog_name="cannbot")
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert line.startswith("错误：") and line.endswith(f"（见 `{where} -h`）"), line
    err = json.loads(res.stdout)["error"]
    assert err["code"] == 2 and err["kind"] == "usage"


def test_an_option_missing_its_value_keeps_the_json_given_before_it():
    res = runner.invoke(app, ["prefetch", "hardware", "list", "--json", "--lang"],
                        prog_name="cannbot")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"]["message"] == "Option '--lang' requires an argument."
    assert res.stderr.startswith("error: ") and "`cannbot prefetch hardware list -h`" in res.stderr


def test_words_after_double_dash_are_not_options():
    """`--` ends the options for Click, so `--lang zh` after it is no language request."""
    res = runner.invoke(app, ["prefetch", "analyze", "--json", "--", "--lang", "zh"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: Got unexpected extra argument(s) (zh)")
    assert json.loads(res.stdout)["error"]["kind"] == "usage"


def test_no_module_reads_the_command_line_outside_typer():
    """Issue 34: no argv scanner before Typer; Click alone reads the words."""
    src = REPO / "src" / "cannbot_prefetch"
    readers = [str(p.relative_to(src)) for p in src.rglob("*.py")
               if "sys.argv" in p.read_text(encoding="utf-8")]
    assert readers == []


def _cli(*args) -> list[str]:
    return [sys.executable, "-c", "from cannbot_prefetch.cli import main; main()", *args]


@pytest.mark.parametrize("args", [
    ["prefetch", "analyze", str(EXAMPLE / "profile")],
    ["prefetch", "analyze", str(EXAMPLE / "profile"), "--json"],
    ["prefetch", "hardware", "list"],
    ["prefetch", "analyze", "-h"],
], ids=["analyze", "analyze --json", "hardware list", "help"])
def test_closed_pipe_exits_0_without_a_message(args):
    """`cannbot ... | head -3`: the reader leaves before the first write."""
    proc = subprocess.Popen(_cli(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                       # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "error" not in err.lower()


# ---------------------------------------------------------------------------------- progress
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(monkeypatch):
    from cannbot_prefetch.cli.progress import status

    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with status("en") as step:
        assert step is None               # the library's default: no progress calls at all
    assert quiet.getvalue() == ""

    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with status("zh") as step:
        step("progress.roofline")
    assert "roofline：判定 MatMul 类算子" in tty.getvalue()


def test_analyze_reports_each_stage(tmp_path):
    from cannbot_prefetch.i18n import CATALOG
    from cannbot_prefetch import analyze

    seen = []
    analyze(str(EXAMPLE / "profile"), out=str(tmp_path),
            progress=lambda key, **kw: seen.append(key))
    assert seen == ["progress.load", "progress.roofline"]
    assert all(k in CATALOG for k in seen)


# ---------------------------------------------------------------------------------- model src
def test_model_src_module_name_resolves_without_importing_the_package():
    """find_spec on a dotted name imports the parents: transformers' __init__ would run (and
    print "PyTorch was not found" where torch is absent). The resolver must import nothing."""
    pytest.importorskip("transformers")
    code = ("import sys; from cannbot_prefetch.pipeline import resolve_model_src; "
            "p = resolve_model_src('transformers.models.llama.modeling_llama'); "
            "print(p); print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('transformers', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=True)
    path, loaded = out.stdout.strip().splitlines()
    assert path.endswith(os.path.join("transformers", "models", "llama", "modeling_llama.py"))
    assert Path(path).is_file()
    assert loaded == "[]", loaded
    assert out.stderr == ""


def test_model_src_unknown_module_is_input_error():
    from cannbot_prefetch.errors import InputError
    from cannbot_prefetch.pipeline import resolve_model_src

    for name in ("no_such_pkg.models.x", "json.no_such_module", "not a module"):
        with pytest.raises(InputError, match="neither a file/folder nor an importable module"):
            resolve_model_src(name)


# ---------------------------------------------------------------------------------- text
def test_assumed_hardware_is_said_once_and_level0_lists_the_matmuls(samples):
    """Level0 export, no part named: one warning line names the assumption (not three), and the
    message lists the MatMuls found instead of a bare "nothing to prefetch"."""
    level0 = samples / "msinsight" / "pytorch_text_level0" / "rank0_ascend_pt"
    res = runner.invoke(app, ["prefetch", "analyze", str(level0)])
    assert res.exit_code == 0, res.output
    assert res.output.count("assumed 910B3") == 1
    assert res.stderr.count("warning: hardware: assumed 910B3") == 1
    assert "MatMulV2 ×8" in res.stdout and "Level0" in res.stdout
    assert "None" not in res.output


def test_units_are_mib_and_microseconds(tmp_path):
    res = runner.invoke(app, ["prefetch", "analyze", str(EXAMPLE / "profile"), "--model-src",
                              "transformers.models.llama.modeling_llama", "--model-config",
                              str(EXAMPLE / "config.json"), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    import re
    assert not re.search(r"\d (us|MB)\b", res.output), re.findall(r".{30}\d (?:us|MB)\b", res.output)
    assert "L2 192.00 MiB" in res.stdout and "weight MiB" in res.stdout
    design = (tmp_path / "prefetch_design.md").read_text(encoding="utf-8")
    assert not re.search(r"\d us\b", design) and "None" not in design


def test_design_gate_says_what_apply_will_say_about_an_installed_file(tmp_path):
    """Planned against the installed transformers: the design's Confirmation section says that
    `apply --write` refuses it and how to copy it; planned against a copy: it does not."""
    transformers = pytest.importorskip("transformers")
    base = ["prefetch", "analyze", str(EXAMPLE / "profile"), "--model-config",
            str(EXAMPLE / "config.json")]
    res = runner.invoke(app, base + ["--model-src", "transformers.models.llama.modeling_llama",
                                     "--out", str(tmp_path / "installed")])
    assert res.exit_code == 0, res.output
    gate = (tmp_path / "installed" / "prefetch_design.md").read_text(encoding="utf-8")
    gate = gate[gate.index("## 9."):]
    assert "`apply --write` refuses" in gate and "cp " in gate and "--allow-installed" in gate
    import shutil
    copy = tmp_path / "proj" / "modeling_llama.py"
    copy.parent.mkdir()
    shutil.copy(Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py", copy)
    res = runner.invoke(app, base + ["--model-src", str(copy), "--out", str(tmp_path / "proj")])
    assert res.exit_code == 0, res.output
    assert "refuses" not in (tmp_path / "proj" / "prefetch_design.md").read_text(encoding="utf-8")


def test_reports_print_no_python_none(tmp_path):
    """A report of a plan whose evidence has no measured verdict (no counters in the profile):
    '–', never 'None'."""
    res = runner.invoke(app, ["prefetch", "analyze", str(EXAMPLE / "profile"), "--model-src",
                              "transformers.models.llama.modeling_llama", "--model-config",
                              str(EXAMPLE / "config.json"), "--out", str(tmp_path)])
    assert res.exit_code == 0
    plan = tmp_path / "prefetch_plan.yaml"
    import yaml as _yaml
    data = _yaml.safe_load(plan.read_text(encoding="utf-8"))
    for site in data["sites"]:
        site["evidence"]["measured_verdict"] = None
    plan.write_text(_yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for lang in ("en", "zh"):
        out = tmp_path / f"r-{lang}" / "report.md"
        res = runner.invoke(app, ["prefetch", "report", "--plan", str(plan), "--baseline",
                                  str(EXAMPLE / "profile"), "--optimized", str(EXAMPLE / "profile"),
                                  "--out", str(out), "--lang", lang])
        assert res.exit_code in (0, 3), res.output
        assert "None" not in out.read_text(encoding="utf-8") and "None" not in res.stdout


# ---------------------------------------------------------------------------------- exit
_EXITS = """
import atexit, sys
_FLAG = sys.argv.pop(1)
atexit.register(lambda: open(_FLAG, "w").write("ran"))
from cannbot_prefetch.cli import main
main()
"""


@pytest.mark.parametrize("args, code", [
    (["prefetch", "analyze", str(EXAMPLE / "profile"), "--json"], 0),
    (["prefetch", "analyze", str(EXAMPLE / "profile"), "--steps", "5:2", "--json"], 2),
    (["prefetch", "hardware", "list"], 0),
], ids=["ok", "unusable", "hardware list"])
def test_console_script_exit_keeps_codes_output_and_atexit(tmp_path, args, code):
    """main() leaves as any Python program does: the exit code, every byte of stdout and the
    atexit handlers of whoever runs it."""
    flag = tmp_path / "atexit"
    out = tmp_path / "out"
    extra = ["--out", str(out)] if args[1] == "analyze" else []
    res = subprocess.run([sys.executable, "-c", _EXITS, str(flag), *args, *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == code, res.stderr
    assert flag.read_text() == "ran"
    if "--json" in args:
        doc = json.loads(res.stdout)          # complete: a lost buffer would not parse
        assert ("error" in doc) == (code == 2)
    else:
        assert res.stdout.strip()


def test_the_console_script_runs_under_a_profiler(tmp_path):
    """`python -m cProfile -o x.prof $(which cannbot) ...` writes its profile: the script
    leaves through SystemExit, so the profiler's own exit code runs (issue 34)."""
    script = Path(sys.executable).with_name("cannbot")
    if not script.is_file():
        pytest.skip("no installed cannbot script beside this interpreter")
    prof = tmp_path / "x.prof"
    res = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), str(script),
                          "prefetch", "hardware", "list"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    import pstats
    assert pstats.Stats(str(prof)).total_calls > 0


def test_main_returns_to_an_in_process_caller_through_system_exit():
    """An in-process caller of cli.main() gets SystemExit with the code, not a killed process."""
    from cannbot_prefetch.cli import main
    argv = sys.argv
    sys.argv = ["cannbot", "prefetch", "analyze", str(EXAMPLE / "profile"), "--steps", "5:2"]
    try:
        with pytest.raises(SystemExit) as exc:
            main()
    finally:
        sys.argv = argv
    assert exc.value.code == 2
