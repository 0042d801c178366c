"""Reader fuzz: mutated REAL profiling samples through `cannbot prefetch analyze`, one process each.

Every input is built from ../shared/profiling-samples (and the measured H200 PyTorch trace in
examples/) by one mutation, and labelled with what a correct reader must do with it:

  damage   rows/events made unusable (negative, NaN, inf, 1e303 durations, text in numbers,
           ragged rows, bad DB cells): exit 2, or exit 0 with rows_skipped >= 1. Exit 0 with
           nothing skipped is a *silent acceptance*.
  benign   the same data spelled differently (BOM, CRLF, CR-only lines, gzip, form feeds,
           no final newline): exit 0 with the original's row count.
  hostile  inputs built to exhaust time or memory (gzip bomb, oversized files, 100k-deep JSON,
           10k columns, an endless line): exit 2.
  random   truncation, flipped bytes, injected garbage, shuffled or dropped columns: exit 0 or 2.
  model    every sample with --model-src (issue 11 D1): exit 0 or 2.

Every run must also: never print a traceback or "internal error", exit 0 or 2 only; on exit 2
print one `error:` line naming the input on stderr, a JSON error object on stdout (--json) and
write nothing; finish within 60 s and stay under 2 GB of memory (peak RSS of the process).

    python tests/fuzz/reader_fuzz.py [--jobs 2] [--limit N] [--keep DIR]

prints one line per failure and the summary line; exit 1 when any check failed.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = Path(os.environ.get("CANNBOT_SAMPLES", REPO.parent / "shared" / "profiling-samples"))
H200 = REPO / "examples/h200-llama3.2-1b-cuda/trace.json.gz"
TINY = REPO / "examples/cpu-tiny-llama"
TIMEOUT_S = 60
MAX_RSS_MB = 2048

CSVS = [
    "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/pytorch_text_level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/server_test_kernel_parse/op_summary_1.csv",
    "mstt/advisor_compute_advice_pipe/kernel_details.csv",
    "mstt/advisor_backend_compute_advice_arith/kernel_details.csv",
    "vllm-ascend-msprof-group/PROF_GROUP_20260823_165254/PROF_PipeUtilization/"
    "PROF_000001_20260823165326062_00625538CIGQAHCJ/mindstudio_profiler_output/"
    "op_summary_20260823165335.csv",
]
TRACES = [
    "mstt/advisor_timeline_advice/trace_view.json",
    "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
]
DB = "msinsight/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
FOLDERS = [
    "msinsight/pytorch_text_level1/rank0_ascend_pt",
    "msinsight/pytorch_text_level1",
    "msinsight/pytorch_db_level1/rank0_ascend_pt",
    "vllm-ascend-msprof-group/PROF_GROUP_20260823_165254",
    "msinsight/server_test_rank_0",
]
BAD_NUMBERS = ["-1", "nan", "NaN", "inf", "-inf", "1e303", "1e400", "abc", "", "N/A", "0x10",
               "9223372036854775807", "1,5"]


@dataclass
class Case:
    label: str              # what was done, for the report
    kind: str               # damage | benign | hostile | random | model
    args: list[str]         # analyze arguments before --json/--out
    base_rows: int | None = None   # benign: the row count the original gives


@dataclass
class Outcome:
    case: Case
    rc: int | None
    seconds: float
    rss_mb: float
    problems: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ inputs

class Builder:
    """Writes mutated copies of the samples under `root` and lists the cases."""

    def __init__(self, root: Path, seed: int = 11):
        self.root = root
        self.rnd = random.Random(seed)
        self.cases: list[Case] = []
        self.n = 0

    def path(self, name: str) -> Path:
        self.n += 1
        d = self.root / f"in{self.n:04d}"
        d.mkdir(parents=True)
        return d / name

    def add(self, label: str, kind: str, path: Path | str, *extra: str, base_rows=None) -> None:
        self.cases.append(Case(label, kind, [str(path), *extra], base_rows))

    # ---------------------------------------------------------- csv

    def csv_cases(self, rel: str, base_rows: int) -> None:
        src = SAMPLES / rel
        text = src.read_bytes().decode("utf-8")
        name = src.name
        rows = list(csv.reader(io.StringIO(text, newline="")))
        header, body = rows[0], rows[1:]
        cols = {c.strip().strip('"'): i for i, c in enumerate(header)}
        dur = next(cols[c] for c in ("Duration(us)", "Task Duration(us)") if c in cols)
        start = next(cols[c] for c in ("Start Time(us)", "Task Start Time(us)") if c in cols)
        for col, what in ((dur, "duration"), (start, "start time")):
            for bad in self.rnd.sample(BAD_NUMBERS, 7):
                k = self.rnd.choice([1, 2, max(1, len(body) // 4)])
                mutated = [list(r) for r in body]
                for i in self.rnd.sample(range(len(mutated)), k):
                    if col < len(mutated[i]):
                        mutated[i][col] = bad
                p = self.path(name)
                p.write_text(_csv_text([header, *mutated]), encoding="utf-8", newline="")
                self.add(f"{rel}: {what} {bad!r} in {k} row(s)", "damage", p)
        for k in (1, 3):
            mutated = [list(r) for r in body]
            for i in self.rnd.sample(range(len(mutated)), k):
                del mutated[i][self.rnd.randrange(len(mutated[i]))]
            p = self.path(name)
            p.write_text(_csv_text([header, *mutated]), encoding="utf-8", newline="")
            self.add(f"{rel}: {k} short row(s)", "damage", p)
        # benign spellings
        lf = text.replace("\r\n", "\n")
        for label, data in (("UTF-8 BOM", b"\xef\xbb\xbf" + text.encode()),
                            ("CRLF lines", lf.replace("\n", "\r\n").encode()),
                            ("CR-only lines", lf.replace("\n", "\r").encode()),
                            ("no final newline", lf.rstrip("\n").encode())):
            p = self.path(name)
            p.write_bytes(data)
            self.add(f"{rel}: {label}", "benign", p, base_rows=base_rows)
        # random damage
        for kind in ("truncate", "flip", "inject", "shuffle_header", "drop_column", "dup_lines",
                     "form_feed_line", "truncate", "flip", "inject"):
            p = self.path(name)
            p.write_bytes(_random_text_mutation(self.rnd, lf, kind).encode("utf-8", "replace"))
            self.add(f"{rel}: {kind}", "random", p)

    # ---------------------------------------------------------- traces

    def trace_cases(self, rel: str | None, base_rows: int, gz: bool = False) -> None:
        src = H200 if rel is None else SAMPLES / rel
        raw = gzip.decompress(src.read_bytes()) if gz else src.read_bytes()
        label = rel or "examples/h200 trace.json.gz"
        doc = json.loads(raw)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        name = "trace.json" if isinstance(doc, dict) else "trace_view.json"
        hardware = _ascend_hardware_pids(events)
        groups = {
            "kernel": [i for i, e in enumerate(events) if e.get("ph") == "X" and (
                e.get("pid") in hardware or e.get("cat") == "kernel")],
            "cpu_op": [i for i, e in enumerate(events)
                       if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                       and not str(e.get("name", "")).startswith("ProfilerStep#")],
        }
        for what, idx in groups.items():
            if not idx:
                continue
            for field_, bad in (("dur", -5), ("dur", "NaN"), ("dur", "Infinity"), ("dur", 1e303),
                                ("dur", None), ("dur", "soon"), ("ts", "later"), ("ts", -1)):
                k = self.rnd.choice([1, 3])
                mutated = json.loads(json.dumps(doc))
                evs = mutated["traceEvents"] if isinstance(mutated, dict) else mutated
                for i in self.rnd.sample(idx, min(k, len(idx))):
                    evs[i][field_] = bad
                text = json.dumps(mutated).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity")
                p = self.path(name)
                p.write_text(text)
                self.add(f"{label}: {what} {field_}={bad!r} x{k}", "damage", p)
        for label_, data in (("UTF-8 BOM", b"\xef\xbb\xbf" + raw),
                             ("form feeds between events", raw.replace(b"},{", b"},\f{", 200)),
                             ("re-indented", json.dumps(doc, indent=1).encode())):
            p = self.path(name)
            p.write_bytes(data)
            self.add(f"{label}: {label_}", "benign", p, base_rows=base_rows)
        p = self.path(name + ".gz")
        p.write_bytes(gzip.compress(raw, 1))
        self.add(f"{label}: gzipped", "benign", p, base_rows=base_rows)
        text = raw.decode("utf-8")
        for kind in ("truncate", "truncate", "flip", "inject"):
            p = self.path(name)
            p.write_bytes(_random_text_mutation(self.rnd, text, kind).encode("utf-8", "replace"))
            self.add(f"{label}: {kind}", "random", p)

    # ---------------------------------------------------------- database

    def db_cases(self) -> None:
        damage = [
            "UPDATE TASK SET startNs = 'soon' WHERE rowid % 29 = 0",
            "UPDATE TASK SET endNs = startNs - 5 WHERE rowid % 31 = 0",
            "UPDATE TASK SET endNs = 9.1e18 WHERE rowid % 37 = 0",
            "UPDATE TASK SET endNs = NULL WHERE rowid % 23 = 0",
            "UPDATE COMPUTE_TASK_INFO SET name = 'x' WHERE rowid % 19 = 0",
            "UPDATE COMPUTE_TASK_INFO SET name = NULL",
            "UPDATE TASK SET startNs = -7",
        ]
        for sql in damage:
            self.add(f"db: {sql}", "damage", self._db(sql))
        random_sql = [
            "ALTER TABLE STRING_IDS RENAME TO S0; CREATE TABLE STRING_IDS (id, value); "
            "INSERT INTO STRING_IDS SELECT CASE WHEN id % 3 = 0 THEN 'text' ELSE id END, value "
            "FROM S0",
            "UPDATE STRING_IDS SET value = x'fffe00' WHERE rowid % 5 = 0",
            "UPDATE STRING_IDS SET value = 3.5 WHERE rowid % 2 = 0",
            "UPDATE TASK_PMU_INFO SET value = 'high' WHERE rowid % 3 = 0",
            "UPDATE TASK_PMU_INFO SET value = 9e999",
            "UPDATE TASK_PMU_INFO SET name = 'x' WHERE rowid % 2 = 0",
            "UPDATE STEP_TIME SET startNs = 'x'",
            "UPDATE AICORE_FREQ SET freq = 'fast'",
            "UPDATE NPU_INFO SET name = x'00ff'",
            "DROP TABLE STRING_IDS",
            "DROP TABLE TASK_PMU_INFO",
            "ALTER TABLE TASK RENAME COLUMN startNs TO s",
            "UPDATE COMPUTE_TASK_INFO SET globalTaskId = globalTaskId + 1000000",
        ]
        for sql in random_sql:
            self.add(f"db: {sql}", "random", self._db(sql))
        data = (SAMPLES / DB).read_bytes()
        for kind in ("truncate", "flip"):
            p = self.path("ascend_pytorch_profiler_0.db")
            b = bytearray(data)
            if kind == "truncate":
                b = b[: self.rnd.randrange(len(b))]
            else:
                for _ in range(40):
                    b[self.rnd.randrange(len(b))] = self.rnd.randrange(256)
            p.write_bytes(bytes(b))
            self.add(f"db: {kind}", "random", p)

    def _db(self, sql: str) -> Path:
        p = self.path("ascend_pytorch_profiler_0.db")
        shutil.copyfile(SAMPLES / DB, p)
        con = sqlite3.connect(p)
        try:
            con.executescript(sql)
            con.commit()
        finally:
            con.close()
        return p

    # ---------------------------------------------------------- hostile

    def hostile_cases(self) -> None:
        p = self.path("trace.pt.trace.json.gz")      # gzip bomb: 600 identical members of 1 MiB
        member = gzip.compress(b" " * (1 << 20), 9)
        with open(p, "wb") as fh:
            fh.write(gzip.compress(b'{"traceEvents": ['))
            for _ in range(600):
                fh.write(member)
        self.add("gzip bomb (600 MB of blanks after decompression)", "hostile", p)
        p = self.path("trace_view.json")             # sparse: size refused before reading
        with open(p, "wb") as fh:
            fh.truncate(600 << 20)
        self.add("600 MB trace_view.json (sparse)", "hostile", p)
        p = self.path("kernel_details.csv")
        with open(p, "wb") as fh:
            fh.write(b"Name,Start Time(us),Duration(us)\n")
            fh.truncate(4200 << 20)
        self.add("4.2 GB kernel_details.csv (sparse)", "hostile", p)
        p = self.path("trace_view.json")
        p.write_text("[" * 100_000 + "]" * 100_000)
        self.add("100k-deep JSON list", "hostile", p)
        p = self.path("trace.json")
        p.write_text('{"traceEvents": [' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "]}")
        self.add("100k-deep JSON object in traceEvents", "hostile", p)
        src = (SAMPLES / CSVS[0]).read_text()
        header, rest = src.split("\n", 1)
        p = self.path("kernel_details.csv")
        p.write_text(header + "".join(f",x{i}" for i in range(10_000)) + "\n" + rest)
        self.add("10k columns", "hostile", p)
        p = self.path("kernel_details.csv")
        p.write_bytes(b"Name,Start Time(us),Duration(us)," + b"x" * (2 << 20))
        self.add("2 MiB header line without end", "hostile", p)
        p = self.path("kernel_details.csv")
        p.write_bytes(b"\r" * (512 << 10))
        self.add("512 KiB of CR only", "hostile", p)
        p = self.path("kernel_details.csv")
        p.write_bytes(b"Step Id,Name,Start Time(us),Duration(us)\n" + b'1,"' + b"a" * (8 << 20))
        self.add("unterminated quote over 8 MiB", "hostile", p)
        p = self.path("trace_view.json")
        p.write_bytes(b"[" + b'{"ph":"X","name":"' + b"k" * (80 << 20) + b'"}]')
        self.add("one 80 MiB event", "hostile", p)
        self.add("empty path", "hostile", "")

    # ---------------------------------------------------------- folders and --model-src

    def folder_cases(self) -> None:
        base = SAMPLES / FOLDERS[0]
        for victim, kind in (("ASCEND_PROFILER_OUTPUT/trace_view.json", "truncate"),
                             ("ASCEND_PROFILER_OUTPUT/trace_view.json", "deep"),
                             ("profiler_info_0.json", "truncate"),
                             ("profiler_info_0.json", "deep"),
                             ("profiler_info_0.json", "bom"),
                             ("ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "flip")):
            d = self.path("x").parent / "rank0_ascend_pt"
            shutil.copytree(base, d)
            f = d / victim
            if kind == "deep":
                f.write_text("[" * 50_000 + "]" * 50_000)
            elif kind == "bom":
                f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
            else:
                f.write_bytes(_random_text_mutation(self.rnd, f.read_text(), kind).encode())
            self.add(f"{FOLDERS[0]}: {victim} {kind}", "random", d)

    def model_cases(self) -> None:
        model = ["--model-src", str(TINY / "model.py"), "--model-config", str(TINY / "config.json")]
        for rel in CSVS + TRACES + FOLDERS:
            self.add(f"{rel} --model-src", "model", SAMPLES / rel, *model)
        self.add("h200 trace --model-src", "model", H200, *model)


def _csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _ascend_hardware_pids(events: list) -> set:
    return {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "M"
            and e.get("name") == "process_name"
            and (e.get("args") or {}).get("name") == "Ascend Hardware"}


def _random_text_mutation(rnd: random.Random, text: str, kind: str) -> str:
    lines = text.splitlines(keepends=True)
    if kind == "truncate":
        return text[: rnd.randrange(1, len(text))]
    if kind == "flip":
        b = list(text)
        for _ in range(rnd.randint(1, 30)):
            b[rnd.randrange(len(b))] = chr(rnd.choice([0, 7, 34, 44, 10, 13, 123, 125, 91, 93,
                                                       rnd.randrange(32, 0x3000)]))
        return "".join(b)
    if kind == "inject":
        at = rnd.randrange(len(text))
        junk = rnd.choice(['"', '\x00' * 10, '{"', "],[", "\ufffd" * 5, ",,,,", "\n\n\n"])
        return text[:at] + junk + text[at:]
    if kind == "shuffle_header":
        cells = lines[0].rstrip("\r\n").split(",")
        rnd.shuffle(cells)
        return ",".join(cells) + "\n" + "".join(lines[1:])
    if kind == "drop_column":
        k = rnd.randrange(lines[0].count(",") + 1)
        return "".join(",".join(c for j, c in enumerate(ln.rstrip("\r\n").split(",")) if j != k)
                       + "\n" for ln in lines)
    if kind == "dup_lines":
        for _ in range(rnd.randint(1, 5)):
            lines.insert(rnd.randrange(1, len(lines) + 1), rnd.choice(lines[1:]))
        return "".join(lines)
    if kind == "form_feed_line":
        lines.insert(rnd.randrange(1, len(lines)), "\f\n")
        return "".join(lines)
    raise ValueError(kind)


def build(root: Path) -> list[Case]:
    b = Builder(root)
    for rel in CSVS:
        b.csv_cases(rel, _rows(SAMPLES / rel))
    for rel in TRACES:
        b.trace_cases(rel, _rows(SAMPLES / rel))
    b.trace_cases(None, _rows(H200), gz=True)
    b.db_cases()
    b.hostile_cases()
    b.folder_cases()
    b.model_cases()
    return b.cases


def _rows(path: Path) -> int:
    from cannbot_prefetch.profiling.load import load_profile

    return load_profile(path).info.rows


# ------------------------------------------------------------------ running

# The CLI as installed, plus a report of the process's own peak memory: VmHWM of its address
# space (ru_maxrss would include the forking parent's pages, which exec inherits in Linux).
_CHILD = """
import atexit, sys
_REPORT = sys.argv.pop(1)
def _hwm():
    with open("/proc/self/status") as fh:
        kb = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
    with open(_REPORT, "w") as out:
        out.write(str(kb))
atexit.register(_hwm)
from cannbot_prefetch.cli import main
main()
"""


def run_case(case: Case, work: Path) -> Outcome:
    out_dir = work / "out"
    cmd = [sys.executable, "-c", _CHILD, str(work / "hwm_kb"),
           "prefetch", "analyze", *case.args, "--json", "--out", str(out_dir)]
    with open(work / "stdout", "wb") as so, open(work / "stderr", "wb") as se:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, cwd=work, start_new_session=True)
        rc, rss_kb, timed_out = None, 0, False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rc, rss_kb = os.waitstatus_to_exitcode(status), usage.ru_maxrss
                proc.returncode = rc
                break
            if time.monotonic() - t0 > TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                timed_out, rss_kb = True, usage.ru_maxrss
                break
            time.sleep(0.02)
        seconds = time.monotonic() - t0
    try:
        rss_kb = int((work / "hwm_kb").read_text())
    except (OSError, ValueError):
        pass    # killed before exit: ru_maxrss (an upper bound) stands
    out = Outcome(case, rc, seconds, rss_kb / 1024)
    stdout = (work / "stdout").read_text(errors="replace")
    stderr = (work / "stderr").read_text(errors="replace")
    _judge(out, stdout, stderr, out_dir, timed_out)
    return out


def _judge(o: Outcome, stdout: str, stderr: str, out_dir: Path, timed_out: bool) -> None:
    p = o.problems
    if timed_out:
        p.append(f"hang: killed after {TIMEOUT_S} s")
        return
    if o.rss_mb > MAX_RSS_MB:
        p.append(f"memory: peak {o.rss_mb:.0f} MB")
    if "Traceback" in stderr or "internal error" in stderr:
        p.append("internal error: " + _last_line(stderr))
    if o.rc not in (0, 2):
        p.append(f"exit code {o.rc}")
        return
    try:
        doc = json.loads(stdout)
    except ValueError:
        p.append("stdout is not one JSON document")
        return
    if o.rc == 2:
        errors = [ln for ln in stderr.splitlines() if ln.startswith(("error:", "internal error:"))]
        others = [ln for ln in stderr.splitlines() if ln and not ln.startswith(("error:", "warning:"))]
        if len(errors) != 1 or others:
            p.append(f"unclear refusal: stderr has {len(errors)} error line(s) and "
                     f"{len(others)} other line(s)")
        # the profile, or (with --model-src) the model file or config at fault
        named = [a for a in o.case.args if a and not a.startswith("--")] or ["path is empty"]
        if errors and not any(Path(n).name in errors[0] or n in errors[0] for n in named):
            p.append(f"refusal does not name the input: {errors[0][:160]}")
        if not isinstance(doc, dict) or not isinstance(doc.get("error"), dict) \
                or not doc["error"].get("message"):
            p.append("--json refusal without an error object")
        if out_dir.exists():
            p.append("refused but wrote " + ", ".join(x.name for x in out_dir.iterdir()))
        if o.case.kind == "benign":
            p.append("benign input refused: " + _last_line(stderr))
        return
    prof = doc.get("profile") or {}
    if not prof.get("rows"):
        p.append("accepted with no rows")
    if o.case.kind == "hostile":
        p.append("hostile input accepted")
    if o.case.kind == "damage" and not prof.get("rows_skipped"):
        p.append("silent acceptance: damaged input, rc 0, rows_skipped 0")
    if o.case.kind == "benign" and prof.get("rows") != o.case.base_rows:
        p.append(f"benign input read differently: {prof.get('rows')} rows, "
                 f"not {o.case.base_rows}")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def run_all(cases: list[Case], root: Path, jobs: int) -> list[Outcome]:
    def one(k: int) -> Outcome:
        work = root / f"run{k:04d}"
        work.mkdir()
        return run_case(cases[k], work)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, range(len(cases))))


def summary(outcomes: list[Outcome]) -> str:
    kinds: dict[str, int] = {}
    for o in outcomes:
        kinds[o.case.kind] = kinds.get(o.case.kind, 0) + 1
    def count(prefix: str) -> int:
        return sum(any(x.startswith(prefix) for x in o.problems) for o in outcomes)
    accepted = sum(o.rc == 0 for o in outcomes)
    refused = sum(o.rc == 2 for o in outcomes)
    other = sum(bool(o.problems) for o in outcomes) - sum(
        count(k) for k in ("internal", "silent", "hang", "memory"))
    slow = max((o.seconds for o in outcomes), default=0)
    peak = max((o.rss_mb for o in outcomes), default=0)
    mix = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"reader fuzz: {len(outcomes)} inputs ({mix}): {accepted} accepted, {refused} refused; "
            f"{count('internal')} internal errors, {count('silent')} silent acceptances, "
            f"{count('hang')} hangs > {TIMEOUT_S} s, {count('memory')} runs > {MAX_RSS_MB // 1024} GB, "
            f"{max(other, 0)} other failures; slowest {slow:.1f} s, peak {peak:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="run only the first N inputs")
    ap.add_argument("--keep", type=Path, default=None, help="build the inputs here and keep them")
    args = ap.parse_args(argv)
    if not SAMPLES.is_dir():
        print(f"samples not found at {SAMPLES}", file=sys.stderr)
        return 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="cannbot-fuzz-"))
    try:
        cases = build(root / "inputs")
        if args.limit:
            cases = cases[: args.limit]
        outcomes = run_all(cases, root, args.jobs)
        for o in outcomes:
            for problem in o.problems:
                print(f"FAIL [{o.case.kind}] {o.case.label}: {problem}")
        print(summary(outcomes))
        return 1 if any(o.problems for o in outcomes) else 0
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
