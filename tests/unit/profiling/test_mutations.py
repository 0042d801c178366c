"""Property tests: mutated real samples load cleanly or fail with InputError, nothing else."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cannbot_prefetch.errors import InputError
from cannbot_prefetch.profiling.load import load_profile

pytestmark = pytest.mark.samples

CSV_SAMPLES = [
    "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/pytorch_text_level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/server_test_kernel_parse/op_summary_1.csv",
    "mstt/advisor_compute_advice_pipe/kernel_details.csv",
    "mstt/advisor_backend_compute_advice_arith/kernel_details.csv",
]
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
GARBAGE = st.sampled_from(["", "N/A", "abc", "-1", "1e400", "nan", '"', '"""', "\t", ",,,",
                           "\x00", "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
                           "9" * 30, "1736408883716197.363.1", ";;;", "\r\n"])


def _load_checked(path: Path, **kw):
    """The property: a Profile with sane invariants, or InputError naming the input."""
    try:
        p = load_profile(path, **kw)
    except InputError as err:
        assert str(err), "InputError without a message"
        return None
    df = p.table.df
    assert df.height == p.info.rows > 0
    assert df["start_ns"].null_count() == 0 and df["name"].null_count() == 0
    assert df["dur_us"].null_count() == 0 and (df["dur_us"] >= 0).all()
    assert p.info.rows_skipped >= 0 and len(p.info.skipped_samples) <= 5
    return p


@st.composite
def csv_mutation(draw):
    sample = draw(st.sampled_from(CSV_SAMPLES))
    kind = draw(st.sampled_from(["truncate", "delete_cell", "garbage_cell", "drop_column",
                                 "shuffle_header", "garbage_line", "duplicate_lines",
                                 "inject_bytes", "blank_lines"]))
    return sample, kind, draw(st.randoms(use_true_random=False)), draw(GARBAGE)


def _mutate_csv(text: str, kind: str, rnd, garbage: str) -> str:
    lines = text.splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    if kind == "truncate":
        return text[: rnd.randrange(0, len(text) + 1)]
    if kind == "inject_bytes":
        at = rnd.randrange(0, len(text) + 1)
        return text[:at] + garbage * rnd.randint(1, 5) + text[at:]
    if kind == "blank_lines":
        for _ in range(rnd.randint(1, 5)):
            body.insert(rnd.randrange(0, len(body) + 1), "\n")
        return header + "".join(body)
    if kind == "duplicate_lines":
        for _ in range(rnd.randint(1, 5)):
            body.insert(rnd.randrange(0, len(body) + 1), rnd.choice(body))
        return header + "".join(body)
    if kind == "garbage_line":
        body[rnd.randrange(len(body))] = garbage + ",x,y\n"
        return header + "".join(body)
    if kind == "shuffle_header":
        cells = header.rstrip("\r\n").split(",")
        rnd.shuffle(cells)
        return ",".join(cells) + "\n" + "".join(body)
    if kind == "drop_column":
        k = rnd.randrange(header.count(",") + 1)
        out = []
        for line in [header, *body]:
            cells = line.rstrip("\r\n").split(",")
            out.append(",".join(cells[:k] + cells[k + 1:]) + "\n")
        return "".join(out)
    # delete_cell / garbage_cell: in a few random rows
    for _ in range(rnd.randint(1, 4)):
        i = rnd.randrange(len(body))
        cells = body[i].rstrip("\r\n").split(",")
        k = rnd.randrange(len(cells))
        if kind == "delete_cell":
            del cells[k]
        else:
            cells[k] = garbage
        body[i] = ",".join(cells) + "\n"
    return header + "".join(body)


@SETTINGS
@given(csv_mutation())
def test_mutated_csv_loads_or_input_error(samples, mutation):
    sample, kind, rnd, garbage = mutation
    text = (samples / sample).read_bytes().decode("utf-8")
    mutated = _mutate_csv(text, kind, rnd, garbage)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(sample).name
        path.write_bytes(mutated.encode("utf-8", "surrogatepass"))
        _load_checked(path)


@SETTINGS
@given(st.randoms(use_true_random=False), GARBAGE,
       st.sampled_from(["drop_key", "bad_ts", "bad_dur", "wrong_type", "truncate", "bad_args"]))
def test_mutated_trace_loads_or_input_error(samples, trace_events, rnd, garbage, kind):
    events = json.loads(json.dumps(trace_events))
    if kind == "truncate":
        payload = json.dumps(events)[: rnd.randrange(len(json.dumps(events)) + 1)]
    else:
        for _ in range(rnd.randint(1, 20)):
            e = rnd.choice(events)
            if kind == "drop_key" and e:
                e.pop(rnd.choice(list(e)))
            elif kind == "bad_ts":
                e["ts"] = garbage
            elif kind == "bad_dur":
                e["dur"] = rnd.choice([garbage, -5, None, [1]])
            elif kind == "wrong_type":
                e[rnd.choice(["pid", "tid", "id", "name", "args"])] = rnd.choice([None, [], {}, 3.5])
            else:
                e["args"] = rnd.choice([None, "x", {"Call stack": 5, "Input Dims": [[None]]}])
        payload = json.dumps(events)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace_view.json"
        path.write_text(payload)
        _load_checked(path)


@pytest.fixture(scope="module")
def trace_events(samples):
    """The first ~1500 events of the 2024 trace_view (kernels, flows, cpu_ops), to stay quick."""
    events = json.loads((samples / "mstt/advisor_timeline_advice/trace_view.json").read_text())
    meta = [e for e in events if e.get("ph") == "M"]
    return meta + [e for e in events if e.get("ph") != "M"][:1500]


DB = "msinsight/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False),
       st.sampled_from(["truncate", "flip_bytes", "drop_table", "null_cells"]))
def test_mutated_db_loads_or_input_error(samples, rnd, kind):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ascend_pytorch_profiler_0.db"
        shutil.copyfile(samples / DB, path)
        if kind in ("truncate", "flip_bytes"):
            data = bytearray(path.read_bytes())
            if kind == "truncate":
                data = data[: rnd.randrange(len(data))]
            else:
                for _ in range(rnd.randint(1, 50)):
                    data[rnd.randrange(len(data))] = rnd.randrange(256)
            path.write_bytes(bytes(data))
        else:
            con = sqlite3.connect(path)
            if kind == "drop_table":
                con.execute(f"DROP TABLE {rnd.choice(['TASK_PMU_INFO', 'STRING_IDS', 'STEP_TIME', 'COMMUNICATION_OP', 'NPU_INFO'])}")
            else:
                col = rnd.choice(["startNs", "endNs", "streamId", "taskId"])
                con.execute(f"UPDATE TASK SET {col} = NULL WHERE rowid % {rnd.randint(2, 50)} = 0")
            con.commit()
            con.close()
        _load_checked(path)


@st.composite
def folder_mutation(draw):
    target = draw(st.sampled_from(["profiler_info", "info_json", "kernel_details", "remove_csv",
                                   "step_trace_time"]))
    return target, draw(st.randoms(use_true_random=False)), draw(GARBAGE)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(folder_mutation())
def test_mutated_profile_folder_loads_or_input_error(samples, mutation):
    """A copied ascend_pt folder (plus an msprof info.json) with one file damaged."""
    target, rnd, garbage = mutation
    src = samples / "msinsight/pytorch_text_level0/rank0_ascend_pt"
    info_src = next((samples / "vllm-ascend-msprof-group").rglob("info.json.0"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "job_1_2_ascend_pt"
        out = root / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        for name in ("kernel_details.csv", "step_trace_time.csv"):
            shutil.copyfile(src / "ASCEND_PROFILER_OUTPUT" / name, out / name)
        shutil.copyfile(src / "profiler_info_0.json", root / "profiler_info_0.json")
        (root / "PROF_1" / "device_0").mkdir(parents=True)
        shutil.copyfile(info_src, root / "PROF_1" / "device_0" / "info.json.0")
        victim = {"profiler_info": root / "profiler_info_0.json",
                  "info_json": root / "PROF_1" / "device_0" / "info.json.0",
                  "kernel_details": out / "kernel_details.csv",
                  "step_trace_time": out / "step_trace_time.csv"}.get(target)
        if victim is None:
            (out / "kernel_details.csv").unlink()
        else:
            text = victim.read_text()
            cut = rnd.randrange(len(text) + 1)
            victim.write_text(text[:cut] + garbage + text[cut + rnd.randrange(0, 40):])
        p = _load_checked(Path(tmp))
        if p is not None and target in ("profiler_info", "step_trace_time"):
            assert p.info.rows > 100               # damaged metadata never costs the kernels
