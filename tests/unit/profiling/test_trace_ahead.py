"""The trace read ahead in a second process (profiling/trace_ahead.py) gives what the one-process
read gives, falls back to it whenever the reader cannot be trusted, and leaves no process behind.

A reader is forked only by a process that has not imported polars, so each case runs in a fresh
interpreter (the script below); pytest's own process only checks that it never forks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars  # noqa: F401 (a process holding polars' thread pool: it must not fork)
import pytest

from cannbot_prefetch.profiling import trace_ahead

REPO = Path(__file__).resolve().parents[3]
# GENERATED (examples/synth): the Llama example's kernel_details.csv + trace_view.json with stacks
EXAMPLE = next((REPO / "examples" / "llama3.2-1b-en" / "profile").glob("*_ascend_pt"))
REAL = "msinsight/pytorch_text_level1/rank0_ascend_pt"   # a real export with both files

_SCRIPT = r"""
import json, os, sys
profile, mode = sys.argv[1], sys.argv[2]
from cannbot_prefetch.profiling import trace_ahead
from cannbot_prefetch import settings
if mode == "off":
    on = settings.policy()
    settings.policy = lambda: {**on, "profiling": {**on["profiling"], "read_trace_ahead": False}}
started = trace_ahead.start(profile)
pids = [pid for pid, _, _ in trace_ahead._pending.values()]
out = {"started": started, "pids": pids}
if mode == "exit":                 # nobody takes the reader
    print(json.dumps(out))
    sys.exit(0)
trace = next(iter(trace_ahead._pending))[0] if trace_ahead._pending else None
if mode == "changed" and trace:
    st = os.stat(trace)
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
took = []
real_take = trace_ahead.take
trace_ahead.take = lambda *a: took.append(real_take(*a)) or took[-1]
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.trace_reader import trace_stacks
df = load_profile(profile).table.df
out["took"] = [t is not None for t in took]
out["pending"] = len(trace_ahead._pending)
out["stacks"] = df["stack"].to_list()
out["ops"] = df["launch_op"].to_list() if "launch_op" in df.columns else None
for pid in pids:
    try:
        os.waitpid(pid, os.WNOHANG)
        out["reaped"] = False
    except ChildProcessError:
        out["reaped"] = True
print(json.dumps(out))
"""


def _run(profile: Path, mode: str = "on") -> dict:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(profile), mode],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _one_process(profile: Path) -> tuple[list, list | None]:
    """The same load in this process (polars is imported: no reader is ever forked here)."""
    from cannbot_prefetch.profiling.load import load_profile

    df = load_profile(profile).table.df
    return df["stack"].to_list(), df["launch_op"].to_list() if "launch_op" in df.columns else None


def _copy(profile: Path, tmp_path: Path) -> Path:
    dst = tmp_path / profile.name
    shutil.copytree(profile, dst)
    return dst


def test_this_process_never_forks():
    assert "polars" in sys.modules
    assert trace_ahead.start(EXAMPLE) is False
    assert not trace_ahead._pending


@pytest.fixture(params=["example", "real"])
def profile(request, tmp_path):
    if request.param == "example":
        return _copy(EXAMPLE, tmp_path)
    samples = request.getfixturevalue("samples")      # skips with its reason without them
    return _copy(samples / REAL, tmp_path)


def test_read_ahead_gives_the_one_process_stacks(profile):
    got = _run(profile)
    assert got["started"] and got["took"] == [True]
    assert got["pending"] == 0 and got["reaped"]
    stacks, ops = _one_process(profile)
    assert any(stacks)
    assert (got["stacks"], got["ops"]) == (stacks, ops)


def test_a_trace_changed_since_the_fork_is_read_again(profile):
    got = _run(profile, "changed")
    assert got["started"] and got["took"] == [False]
    assert (got["stacks"], got["ops"]) == _one_process(profile)


def test_a_reader_that_fails_leaves_the_one_process_answer(tmp_path):
    profile = _copy(EXAMPLE, tmp_path)
    trace = next(profile.rglob("trace_view.json"))
    trace.write_bytes(trace.read_bytes()[:len(trace.read_bytes()) // 2])   # cut mid-event
    got = _run(profile)
    assert got["started"] and got["took"] == [False] and got["reaped"]
    assert (got["stacks"], got["ops"]) == _one_process(profile)


def test_switched_off_in_the_policy(tmp_path):
    got = _run(_copy(EXAMPLE, tmp_path), "off")
    assert not got["started"] and got["pids"] == []
    assert got["took"] == [False] and any(got["stacks"])     # read here, in one process


def test_a_reader_nobody_takes_does_not_outlive_the_command(tmp_path):
    got = _run(_copy(EXAMPLE, tmp_path), "exit")
    assert got["started"] and len(got["pids"]) == 1
    with pytest.raises(ProcessLookupError):     # stopped and reaped before the parent exited
        os.kill(got["pids"][0], 0)


def test_no_reader_without_a_trace_beside_the_table(tmp_path):
    profile = _copy(EXAMPLE, tmp_path)
    next(profile.rglob("trace_view.json")).unlink()
    got = _run(profile)
    assert not got["started"] and got["took"] == [] and not any(got["stacks"])


def test_the_reader_imports_no_polars():
    """The reader's work (trace_kernels.stack_columns and what it imports) is plain Python: a
    polars import there (~0.35 s) would sit on the forked run's critical path."""
    code = ("import sys; import cannbot_prefetch.profiling.trace_kernels; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('polars', 'libcst')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


_TWICE = r"""
import json, os, sys
from cannbot_prefetch.profiling import trace_ahead
a, b = sys.argv[1], sys.argv[2]
out = {"first": trace_ahead.start(a)}
first = [pid for pid, _, _ in trace_ahead._pending.values()]
out["again"] = trace_ahead.start(a)                  # the CLI, after the console's guess
out["same"] = [pid for pid, _, _ in trace_ahead._pending.values()] == first
out["other"] = trace_ahead.start(b)                  # the guess read another trace
out["traces"] = [t for t, _ in trace_ahead._pending]
try:
    os.kill(first[0], 0)
    out["first_alive"] = True
except ProcessLookupError:
    out["first_alive"] = False
print(json.dumps(out))
"""


def test_a_reader_started_twice_forks_once_and_one_for_another_trace_is_stopped(tmp_path):
    """The console's guess at the command line (console._read_ahead) and the CLI's own start:
    the same trace keeps the first reader; another trace stops it (nobody would take it)."""
    a, b = _copy(EXAMPLE, tmp_path / "a"), _copy(EXAMPLE, tmp_path / "b")
    proc = subprocess.run([sys.executable, "-c", _TWICE, str(a), str(b)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["first"] and got["again"] and got["same"] and got["other"]
    assert got["traces"] == [str(next(b.rglob("trace_view.json")))]
    assert got["first_alive"] is False


@pytest.mark.parametrize("argv, expected", [
    (["prefetch", "analyze", "P"], ("P", None, None)),
    (["prefetch", "analyze", "P", "--rank", "3", "--run", "R", "--json"], ("P", 3, "R")),
    (["prefetch", "analyze", "P", "--model-src", "m.py", "--rank=2"], ("P", 2, None)),
    (["prefetch", "analyze", "--rank", "1", "P"], None),          # options first: no guess
    (["prefetch", "analyze", "P", "--help"], None),
    (["prefetch", "analyze", "P", "--rank", "all"], None),        # every rank: no read ahead
    (["prefetch", "analyze", "P", "--rank", "-1"], None),         # the CLI refuses it
    (["prefetch", "analyze", "P", "--rank"], None),
    (["prefetch", "analyze", "P", "--rank", "\u00b2"], None),    # a digit int() refuses
    (["prefetch", "verify", "P"], None),
    (["prefetch", "analyze"], None),
])
def test_the_console_guesses_the_profile_from_plain_words(monkeypatch, argv, expected):
    from cannbot_prefetch import console

    calls = []
    monkeypatch.setattr(trace_ahead, "start", lambda p, rank=None, run=None:
                        calls.append((p, rank, run)) or False)
    console._read_ahead(argv)
    assert calls == ([] if expected is None else [expected])
