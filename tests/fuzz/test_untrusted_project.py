"""Fault suite (issue 33): the project folder and every file a plan names are untrusted.

Each case is one reproduced attack: a project (the toy model of tests/fixtures/vllm_style and a
plan for it, or a copy of a REAL ../shared profiling sample) damaged the way the issue found, run
through the real CLI in a child process (`cannbot prefetch ...`) with its own wall-clock limit
(LIMIT_S) and peak RSS measured (wait4). Oracles, per case:
- a marker file that only the payload can create must not exist (execution);
- a folder OUTSIDE the project must be byte-for-byte what it was (writes), with no file added;
- the command ends within LIMIT_S with a refusal (exit 1/2, one `error:` line) or, where the case
  says so, exit 0; never an internal error or a traceback; peak RSS under MEMORY_MB.
Each case's outcome is tallied under its class (`untrusted: <class>`) in the suite's summary line.
Every plan, YAML and DB below is GENERATED here from the documented formats (docs/plan.md, the
torch_npu DB schema of the real sample it copies); the payloads are the issue's.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
import yaml

import fuzz_harness as H
from cannbot_prefetch.plan import (Basis, Insert, Join, Plan, Saving, Site, Switch, Target,
                                   save_plan, sha256_file)

LIMIT_S = 30          # the bound: every input ends within 30 s ...
MEMORY_MB = 1024      # ... and 1 GB
FIX = H.REPO / "tests" / "fixtures" / "vllm_style"
DB = ("msinsight/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
      "ascend_pytorch_profiler_0.db")
KERNELS = "msinsight/pytorch_text_level1/rank0_ascend_pt"

pytestmark = [pytest.mark.slow]


# ---------------------------------------------------------------- the project and the oracles

def _site(sha: str, file: str = "toy_model.py") -> Site:
    return Site(id="toy-down", target=Target(file, "ToyMLP", "down_proj", "self.down_proj.weight"),
                insert=Insert("ToyMLP", "forward", "self.up_proj", "after"), dependency="h",
                join=Join("ToyMLP", "forward", "end"), max_size=1024,
                basis=Basis((16, 32), 4.0, 0.5), ladder={}, mapping="manual", evidence={},
                saving_us=Saving(0, 0, 0), source_sha256=sha, max_tokens=64)


@dataclass
class World:
    root: Path                 # tmp folder holding both
    proj: Path                 # the project
    outside: Path              # must not change
    marker: Path               # must not appear

    @property
    def plan(self) -> Path:
        return self.proj / "plan.yaml"

    def edit(self, fn: Callable[[dict], None]) -> None:
        data = yaml.safe_load(self.plan.read_text())
        fn(data)
        self.plan.write_text(yaml.safe_dump(data, sort_keys=False))

    def touch_code(self) -> str:
        return f"__import__('pathlib').Path({str(self.marker)!r}).touch()\n"


def _world(tmp: Path) -> World:
    proj, outside = tmp / "proj", tmp / "outside"
    proj.mkdir()
    outside.mkdir()
    for name in ("toy_model.py", "toy_factory.py"):
        shutil.copyfile(FIX / name, proj / name)
    (proj / "runner.yaml").write_text("model_config:\n  custom_params:\n    batch: 1\n")
    (outside / "keep.txt").write_text("outside the project\n")
    w = World(tmp, proj, outside, tmp / "MARKER")
    save_plan(Plan(sites=(_site(sha256_file(proj / "toy_model.py")),),
                   switch=Switch(config_path="custom_params.enable_prefetch",
                                 config_file="runner.yaml")), w.plan)
    return w


def _snap(folder: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(folder))] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


def _run(args: list[str], cwd: Path, fsize: int | None = None) -> tuple[int | None, str, float,
                                                                        float]:
    """The CLI in a child: (exit code or None on timeout, output, seconds, peak RSS MB);
    `fsize`: a file-size limit (RLIMIT_FSIZE) for the child, as a full disk or quota would."""
    import resource

    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(H.REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", "from cannbot_prefetch.cli import main; main()",
                             "prefetch", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=limit)
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        return None, out.decode(errors="replace"), time.monotonic() - start, 0.0
    seconds = time.monotonic() - start
    # the child is reaped by communicate(); its peak RSS is the children's maximum so far
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return proc.returncode, out.decode(errors="replace"), seconds, rss


@dataclass
class Case:
    cls: str                                   # the class it is tallied under
    name: str
    setup: Callable[[World], list[str]]        # damages the world, returns the CLI args
    expect: str = "refused"                    # refused | ok
    says: tuple[str, ...] = ()                 # words the output must hold (file, key)
    check: Callable[[World, str], list[str]] = field(default=lambda w, out: [])
    fsize: int | None = None                   # RLIMIT_FSIZE for the child


def _outcome(code, out: str) -> str:
    if code is None:
        return "hang"
    if "internal error" in out or "Traceback (most recent call last)" in out:
        return "internal"
    if code == 0:
        return "ok"
    if code in (1, 2) and "error" in out.lower():
        return "refused"
    return "internal"


# ---------------------------------------------------------------- the cases

def _evil_module(w: World, folder: Path, name: str = "evil_model.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(w.touch_code() + "import torch\nclass EvilModel(torch.nn.Module):\n"
                               "    pass\n")
    (folder / "config.json").write_text('{"architectures": ["EvilModel"]}')
    return folder / name


def _target(file_of: Callable[[World], str], cmd: str):
    def setup(w: World) -> list[str]:
        evil = _evil_module(w, w.outside)
        file = file_of(w) if file_of is not None else str(evil)
        w.edit(lambda d: d["sites"][0]["target"].update(file=file))
        return {"verify": ["verify", str(w.plan)], "apply": ["apply", str(w.plan)],
                "apply-write": ["apply", str(w.plan), "--write", "--yes"],
                "report": ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")]}[cmd]
    return setup


def _linked(w: World) -> str:
    (w.proj / "linked.py").symlink_to(w.outside / "evil_model.py")
    return "linked.py"


PATH_FIELDS = [
    Case("plan path fields", f"target.file {how} x {cmd}", _target(fn, cmd),
         says=("target.file", "outside the project root"))
    for how, fn in (("absolute", None), ("../", lambda w: "../outside/evil_model.py"),
                    ("symlink", _linked))
    for cmd in ("verify", "apply", "apply-write")
] + [
    Case("plan path fields", f"switch.config_file {cf}", (lambda cf: lambda w: (
        (w.proj / ".git").mkdir(exist_ok=True), (w.proj / ".git" / "config").write_text("[core]\n"),
        (w.proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n"),
        (w.outside / "victim.yaml").write_text("a: 1\n"),
        w.edit(lambda d: d["switch"].update(config_file=cf)),
        ["apply", str(w.plan), "--write", "--yes"])[-1])(cf),
         says=("switch.config_file",))
    for cf in ("../outside/victim.yaml", ".git/config", ".git/HEAD", "toy_model.py", "plan.yaml")
] + [
    Case("plan path fields", f"report --out {what}", (lambda what: lambda w: [
        "report", "--plan", str(w.plan), "--out", str(w.proj / what)])(what), says=("--out",))
    for what in ("plan.yaml", "toy_model.py")
] + [
    Case("plan path fields", f"created_from.{key} outside", (lambda key: lambda w: (
        (w.outside / "hw.yaml").write_text((H.REPO / "configs" / "hardware" / "910B3.yaml")
                                           .read_text()),
        w.edit(lambda d: d.update(created_from={"hardware": "910B3", key: str(w.outside / "hw.yaml")}
                                  if key == "hardware_file" else {key: str(w.outside / "hw.yaml")})),
        ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")])[-1])(key),
         expect="refused" if key == "hardware" else "ok",
         says=("created_from.hardware",) if key == "hardware" else ())
    for key in ("hardware", "hardware_file")
]


def _state(kind: str):
    def setup(w: World) -> list[str]:
        state = w.proj / ".cannbot-prefetch"
        plan = w.plan
        if kind == "lock":
            state.mkdir()
            (state / "lock").symlink_to(w.outside / "created_lock")
        elif kind == "state folder":
            state.symlink_to(w.outside, target_is_directory=True)
        elif kind == "backup folder":
            state.mkdir()
            (state / "backup").symlink_to(w.outside, target_is_directory=True)
        else:
            out = w.proj / "out"
            (out / ".cannbot-prefetch").mkdir(parents=True)
            (out / ".cannbot-prefetch" / "lock").symlink_to(w.outside / "created_lock")
            w.edit(lambda d: (d["sites"][0]["target"].update(file="../toy_model.py"),
                              d["switch"].update(config_file="../runner.yaml")))
            shutil.move(plan, out / "plan.yaml")
            plan = out / "plan.yaml"
        return ["apply", str(plan), "--write", "--yes", "--root", str(w.proj)]
    return setup


STATE = [Case("state symlinks", k, _state(k), says=(".cannbot-prefetch", "symlink"))
         for k in ("lock", "state folder", "backup folder", "plan's lock")]

_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


def _plan_text(w: World, text: str) -> None:
    body = w.plan.read_text()
    w.plan.write_text(body + text)


def _alias_string(w: World) -> list[str]:
    big = "x" * (1 << 20)
    w.edit(lambda d: d["sites"][0].update(evidence={"s": "PLACEHOLDER"}))
    text = w.plan.read_text().replace("s: PLACEHOLDER", f"s: &big {big}\n    t: [" +
                                      ", ".join(["*big"] * 2000) + "]")
    w.plan.write_text(text)
    return ["apply", str(w.plan), "--write", "--yes"]


def _hw_bomb(w: World) -> list[str]:
    (w.proj / "hw.yaml").write_text(_LAUGHS)
    w.edit(lambda d: d.update(created_from={"hardware": "hw.yaml"}))
    return ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")]


YAML = [
    Case("YAML bombs", "plan: billion laughs", lambda w: (
        _plan_text(w, "bomb:\n" + "".join("  " + ln + "\n" for ln in _LAUGHS.splitlines())),
        ["apply", str(w.plan), "--write", "--yes"])[-1], says=("plan.yaml",)),
    Case("YAML bombs", "plan: 1 MiB string x 2000 aliases (apply --write)", _alias_string,
         says=("plan.yaml",)),
    Case("YAML bombs", "plan: 1 MiB string x 2000 aliases (revert)", lambda w: (
        _alias_string(w), ["apply", str(w.plan), "--revert", "--write", "--yes"])[-1],
         says=("plan.yaml",)),
    Case("YAML bombs", "plan: alias holding itself", lambda w: (
        _plan_text(w, "loop: &l [*l]\n"), ["apply", str(w.plan)])[-1], says=("plan.yaml",)),
    Case("YAML bombs", "hardware file in created_from: billion laughs", _hw_bomb,
         says=("hw.yaml",)),
    Case("YAML bombs", "plan: duplicate max_size", lambda w: (
        w.plan.write_text(w.plan.read_text().replace("  max_size: 1024",
                                                     "  max_size: 1024\n  max_size: 2048")),
        ["apply", str(w.plan), "--write", "--yes"])[-1], says=("max_size", "twice")),
    Case("YAML bombs", "plan: duplicate target.file", lambda w: (
        w.plan.write_text(w.plan.read_text().replace(
            "    file: toy_model.py", "    file: toy_model.py\n    file: ../outside/x.py")),
        ["apply", str(w.plan), "--write", "--yes"])[-1], says=("file", "twice")),
]


def _digits(path: tuple, value) -> Callable[[World], list[str]]:
    def setup(w: World) -> list[str]:
        def put(d):
            node = d
            for k in path[:-1]:
                node = node.setdefault(k, {}) if isinstance(node, dict) else node[k]
            node[path[-1]] = value
        w.edit(put)
        return ["apply", str(w.plan), "--write", "--yes"]
    return setup


def _raw_int(key_line: str, digits: int) -> Callable[[World], list[str]]:
    def setup(w: World) -> list[str]:
        text = w.plan.read_text()
        new = text.replace(key_line, key_line.split(":")[0] + ": " + "9" * digits)
        assert new != text
        w.plan.write_text(new)
        return ["apply", str(w.plan), "--write", "--yes"]
    return setup


def _helper_in_the_way(kind: str):
    def setup(w: World) -> list[str]:
        d = w.proj / ("_cannbot_prefetch.py" if kind == "folder" else "_cannbot_prefetch")
        d.mkdir()
        if kind == "package":
            (d / "__init__.py").write_text(w.touch_code())
        return ["apply", str(w.plan), "--write", "--yes"]
    return setup


VALUES = [
    Case("digit and depth limits", "max_size: 5000 digits", _raw_int("  max_size: 1024", 5000),
         says=("max_size",)),
    Case("digit and depth limits", "evidence: 5000 digits", lambda w: (
        w.plan.write_text(w.plan.read_text().replace("  evidence: {}", "  evidence: {n: " + "9" * 5000
                                                     + "}")),
        ["apply", str(w.plan), "--write", "--yes"])[-1], says=("'n'",)),
    Case("digit and depth limits", "created_from.inputs 400 deep", lambda w: (
        w.plan.write_text(w.plan.read_text().replace(
            "created_from: {}", "created_from: {inputs: " + "[" * 400 + "]" * 400 + "}")),
        ["apply", str(w.plan), "--write", "--yes"])[-1], says=("plan.yaml",)),
    Case("digit and depth limits", "hardware_overrides.hbm_bw_tbps 1e-300",
         lambda w: (w.edit(lambda d: d.update(created_from={
             "hardware": "910B3", "hardware_overrides": {"hbm_bw_tbps": 1e-300}})),
             ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")])[-1],
         says=("hardware_overrides.hbm_bw_tbps",)),
    Case("digit and depth limits", "helper path is a folder", _helper_in_the_way("folder"),
         says=("_cannbot_prefetch",)),
    Case("digit and depth limits", "a package named like the helper",
         _helper_in_the_way("package"), says=("_cannbot_prefetch",)),
]


def _git(key: str):
    def setup(w: World) -> list[str]:
        script = w.root / "cmd.sh"
        script.write_text(f"#!/bin/sh\ntouch {w.marker}\ncat\n")
        script.chmod(0o755)
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}

        def git(*a):
            subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c",
                            "core.fsmonitor=false", *a], cwd=w.proj, capture_output=True,
                           check=True, env=env)
        git("init", "-q")
        git("add", "toy_model.py")
        git("commit", "-q", "-m", "x")
        if key == "filter":
            git("config", "filter.evil.clean", str(script))
            (w.proj / ".gitattributes").write_text("*.py filter=evil\n")
        else:
            git("config", "core.fsmonitor", str(script))
        (w.proj / "toy_model.py").write_text((w.proj / "toy_model.py").read_text() + "\n")
        w.edit(lambda d: d["sites"][0].update(source_sha256=sha256_file(w.proj / "toy_model.py")))
        return ["apply", str(w.plan)]
    return setup


GIT = [Case("git config commands", f"dry-run with {k}", _git(k), expect="ok")
       for k in ("core.fsmonitor", "filter")] if shutil.which("git") else []


def _sample_copy(w: World, rel: str) -> Path:
    src = H.SAMPLES / rel
    if not src.exists():     # real samples are never copied into the repo: skip, as every sample test
        pytest.skip(f"{src} not found (set CANNBOT_SAMPLES or check out shared/ beside the repo)")
    dest = w.proj / "prof" / src.name
    if src.is_dir():
        shutil.copytree(src, dest)
    else:
        dest.parent.mkdir(parents=True)
        shutil.copyfile(src, dest)
    return dest


def _db(kind: str):
    def setup(w: World) -> list[str]:
        db = _sample_copy(w, DB)
        con = sqlite3.connect(db)
        if kind == "duplicate globalTaskId":
            # COMPUTE_TASK_INFO's key made plain (a damaged or hand-built DB), then one task id
            # repeated 6000 times in both tables: a naive join makes 36 M rows
            cols = [r[1] for r in con.execute("PRAGMA table_info(COMPUTE_TASK_INFO)")]
            con.execute("CREATE TABLE C2 AS SELECT * FROM COMPUTE_TASK_INFO")
            con.execute("DROP TABLE COMPUTE_TASK_INFO")
            con.execute("ALTER TABLE C2 RENAME TO COMPUTE_TASK_INFO")
            gid = con.execute("SELECT globalTaskId FROM TASK LIMIT 1").fetchone()[0]
            for table in ("TASK", "COMPUTE_TASK_INFO"):
                names = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
                row = con.execute(f"SELECT * FROM {table} WHERE globalTaskId = ?", (gid,)).fetchone()
                if row is None:
                    row = con.execute(f"SELECT * FROM {table} LIMIT 1").fetchone()
                row = list(row)
                row[names.index("globalTaskId")] = gid
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})",
                                [row] * 6000)
            del cols
        elif kind == "zeroblob":
            con.execute("INSERT INTO STRING_IDS (id, value) VALUES (999999, zeroblob(200000000))")
            con.execute("UPDATE COMPUTE_TASK_INFO SET name = 999999 WHERE rowid = "
                        "(SELECT MIN(rowid) FROM COMPUTE_TASK_INFO)")
        elif kind == "repeated connection ids":
            con.execute("INSERT INTO CONNECTION_IDS (id, connectionId) SELECT 1, 1 FROM "
                        "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                        "WHERE i < 3000) SELECT i FROM n)")
            cols = [r[1] for r in con.execute("PRAGMA table_info(PYTORCH_API)")]
            row = list(con.execute("SELECT * FROM PYTORCH_API LIMIT 1").fetchone())
            row[cols.index("connectionId")] = 1
            con.executemany(f"INSERT INTO PYTORCH_API VALUES ({', '.join('?' * len(row))})",
                            [row] * 3000)
        elif kind == "WAL mode":
            con.execute("PRAGMA journal_mode=WAL")
        con.commit()
        con.close()
        for extra in db.parent.glob(db.name + "-*"):
            extra.unlink()
        return ["analyze", str(db), "--out", str(w.proj / "o")]
    return setup


def _no_db_sidecars(w: World, out: str) -> list[str]:
    left = [p.name for p in (w.proj / "prof").glob("*.db-*")]
    return [f"sidecar files created beside the DB: {left}"] if left else []


DBS = [
    Case("DB duplicate keys", "TASK x COMPUTE_TASK_INFO share one globalTaskId 6000 x 6000",
         _db("duplicate globalTaskId"), says=("globalTaskId", "table TASK")),
    Case("DB duplicate keys", "CONNECTION_IDS x PYTORCH_API 3000 x 3000",
         _db("repeated connection ids"), expect="any"),
    Case("DB duplicate keys", "200 MB zeroblob in STRING_IDS", _db("zeroblob"), expect="any"),
    Case("DB duplicate keys", "WAL-mode DB read without -wal/-shm", _db("WAL mode"),
         expect="any", check=_no_db_sidecars),
]


def _fifo(name: str):
    def setup(w: World) -> list[str]:
        run = _sample_copy(w, KERNELS)
        out = run / "ASCEND_PROFILER_OUTPUT"
        if name == "kernel_details.csv":
            (out / name).unlink()
            os.mkfifo(out / name)
        elif name == "profiler_info_0.json":
            for p in run.glob("profiler_info*.json"):
                p.unlink()
            os.mkfifo(run / name)
        else:
            dev = run / "device_0"
            dev.mkdir(exist_ok=True)
            for p in dev.glob("info.json*"):
                p.unlink()
            os.mkfifo(dev / name)
        return ["analyze", str(run), "--out", str(w.proj / "o")]
    return setup


FIFOS = [Case("FIFOs in profile folders", n, _fifo(n), expect="any")
         for n in ("kernel_details.csv", "profiler_info_0.json", "info.json.0")]


def _project_fifo(name: str):
    def setup(w: World) -> list[str]:
        (w.proj / name).unlink(missing_ok=True)
        os.mkfifo(w.proj / name)
        if name == "_cannbot_prefetch.py":   # the helper: apply once, then the file is a FIFO
            return ["apply", str(w.plan), "--revert", "--write", "--yes"]
        return ["apply", str(w.plan), "--write", "--yes"]
    return setup


FIFOS += [Case("FIFOs in the project", f"{n} is a FIFO", _project_fifo(n), expect=e, says=s)
          for n, e, s in (("runner.yaml", "refused", ("switch.config_file",)),
                          ("other_model.py", "ok", ()),
                          ("_cannbot_prefetch.py", "refused", ("_cannbot_prefetch",)))]


def _report_text(w: World) -> list[str]:
    w.edit(lambda d: d["sites"][0].update(evidence={
        "signature": {"type": "MatMulV2\n# injected heading", "input_shapes": "1|2",
                      "dtypes": "<script>alert(1)</script>"},
        "notes": ["risk: \x1b]0;retitled\x07\x1b[2J cleared"]}))
    return ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")]


def _report_clean(w: World, out: str) -> list[str]:
    md = (w.proj / "r" / "report.md").read_text()
    bad = [s for s in ("<script>", "\x1b", "\x07", "\n# injected") if s in md or s in out]
    return [f"report.md or the output holds {bad!r}"] if bad else []


TEXT = [Case("report text", "evidence with newline, |, <script>, terminal escapes", _report_text,
             expect="ok", check=_report_clean)]

def _surrogate_trace(w: World) -> list[str]:
    trace = _sample_copy(w, "mstt/advisor_timeline_advice/trace_view.json")
    text = trace.read_text()
    name = '"name": "aclnnAddmm_MatMulCommon_MatMulV2'
    assert name in text
    trace.write_text(text.replace(name, name[:9] + "\\udc80" + name[9:]))
    return ["analyze", str(trace), "--out", str(w.proj / "o")]


def _read_only(which: str):
    def setup(w: World) -> list[str]:
        (w.proj / which).chmod(0o444)
        return ["apply", str(w.plan), "--write", "--yes"]
    return setup


def _unchanged_model(w: World, out: str) -> list[str]:
    same = (w.proj / "toy_model.py").read_bytes() == (FIX / "toy_model.py").read_bytes()
    return [] if same and "--model-src" not in out else [f"model changed or advice wrong: {out}"]


TEXT += [Case("report text", "a lone surrogate escape in a trace kernel name", _surrogate_trace,
              says=("trace_view.json", "Unicode"))] if H.SAMPLES.is_dir() else []
READ_ONLY = [Case("read-only files", f"{f} without a write bit", _read_only(f),
                  says=(f, "chmod"), check=_unchanged_model)
             for f in ("plan.yaml", "runner.yaml")]


def _big_report(w: World) -> list[str]:
    w.edit(lambda d: d["sites"][0].update(evidence={"notes": ["risk: " + "x" * 4000]}))
    return ["report", "--plan", str(w.plan), "--out", str(w.proj / "r" / "report.md")]


OS = [Case("OS errors", "report past a 2 KiB file-size limit (a full disk)", _big_report,
           says=("report.md",), fsize=2048),
      Case("OS errors", "apply --write past a 2 KiB file-size limit", lambda w: [
          "apply", str(w.plan), "--write", "--yes"], says=(".py",), fsize=2048,
           check=lambda w, out: [] if (w.proj / "toy_model.py").read_bytes()
           == (FIX / "toy_model.py").read_bytes() else ["the model was left changed"])]

CASES = PATH_FIELDS + STATE + YAML + VALUES + GIT + FIFOS + TEXT + OS + READ_ONLY
if H.SAMPLES.is_dir():
    CASES += DBS


@pytest.mark.parametrize("case", CASES, ids=[f"{c.cls}: {c.name}" for c in CASES])
def test_untrusted_project(tmp_path, case):
    if case.cls == "plan path fields" and "verify" in case.name:
        pytest.importorskip("torch")
    w = _world(tmp_path)
    args = case.setup(w)
    before = _snap(w.outside)
    code, out, seconds, rss = _run(args, w.proj, case.fsize)   # from the project, as a user
    outcome = _outcome(code, out)
    problems = []
    if w.marker.exists():
        problems.append("the payload ran (marker file created)")
    if _snap(w.outside) != before:
        problems.append("the folder outside the project changed")
    if case.expect != "any" and outcome != case.expect:
        problems.append(f"expected {case.expect}, got {outcome}")
    if outcome in ("internal", "hang"):
        problems.append(outcome)
    missing = [s for s in case.says if s not in out]
    if missing:
        problems.append(f"the message does not name {missing}")
    if rss > MEMORY_MB:
        problems.append(f"peak RSS {rss:.0f} MB > {MEMORY_MB} MB")
    if outcome != "hang":
        problems += case.check(w, out)
    tally = outcome if not problems else ("broken" if "outside" in " ".join(problems)
                                          or "marker" in " ".join(problems)
                                          else outcome if outcome in H.BAD else "silent")
    H.TALLY.add(f"untrusted: {case.cls}", tally, seconds, f"{case.name}: {problems} {out[-300:]}")
    H.TALLY.child_rss_mb = max(H.TALLY.child_rss_mb, rss)
    assert not problems, f"{problems}\n{out[-2000:]}"
