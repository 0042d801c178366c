"""Fuzz (hypothesis): the REAL profiling samples of ../shared/profiling-samples (copied into a
temp folder, never into the repo), damaged the ways real exports get damaged, through
`analyze --json` (and with `--model-src`, which maps kernels to the real modeling_llama.py).

Damage to data rows (a negative / NaN / infinite / absurd / non-numeric duration, a row cut in
half) must be said: exit 2, or exit 0 with `rows_skipped` > 0. Exit 0 with nothing skipped is a
silent acceptance. Benign changes (BOM, CR or CRLF endings, blank lines) must not crash. No input
may give an internal error, hang, or grow past the memory limit.

Readers are another part's work (issue 11 D1-D3, D11); this file is the shared yardstick."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import fuzz_harness as H

pytestmark = [pytest.mark.samples, pytest.mark.slow,
              pytest.mark.skipif(not H.SAMPLES.is_dir(), reason=f"no samples at {H.SAMPLES}")]

CSVS = ["mstt/advisor_compute_advice_pipe/kernel_details.csv",
        "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
        "mstt/advisor_backend_compute_advice_arith/kernel_details.csv"]
TRACES = ["mstt/advisor_timeline_advice/trace_view.json"]
DAMAGE = ("neg", "nan", "inf", "huge", "text", "cut_row")
BENIGN = ("bom", "crlf", "cr", "blank_lines")


def _dur_col(header: list[str]) -> int | None:
    return next((i for i, h in enumerate(header) if h.strip().lower().startswith("duration")), None)


_VALUES = {"neg": "-5", "nan": "NaN", "inf": "inf", "huge": "1e303", "text": "abc"}


def _damage_csv(text: str, op: str, n: int) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    k = 1 + n % max(len(body), 1)
    if op in _VALUES:
        col = _dur_col(header)
        rows[k][col] = _VALUES[op]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    text = out.getvalue()
    if op == "cut_row":     # the last data row cut in half (a killed exporter)
        lines = text.splitlines(keepends=True)
        last = lines[-1]
        text = "".join(lines[:-1]) + last[: max(1, len(last) // 3)]
    return text


def _benign(text: str, op: str) -> str:
    if op == "bom":
        return "\ufeff" + text
    if op == "crlf":
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    if op == "cr":
        return text.replace("\r\n", "\n").replace("\n", "\r")
    return text.replace("\n", "\n\n", 3)


def _damage_trace(text: str, op: str, n: int) -> str:
    events = json.loads(text)
    # the device kernels, the rows the reader uses: events of the "Ascend Hardware" process
    device = {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "M"
              and e.get("name") == "process_name"
              and (e.get("args") or {}).get("name") == "Ascend Hardware"}
    kernels = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e
               and e.get("pid") in device]
    e = kernels[n % len(kernels)]
    e["dur"] = {"neg": -5.0, "nan": float("nan"), "inf": float("inf"), "huge": 1e303,
                "text": "abc"}.get(op, e["dur"])
    text = json.dumps(events)
    if op == "cut_row":
        text = text[: len(text) - 1 - n % 50]     # truncated: not JSON any more
    return text


@st.composite
def profile_mutations(draw):
    kind = draw(st.sampled_from(["csv", "csv", "trace"]))
    source = draw(st.sampled_from(CSVS if kind == "csv" else TRACES))
    op = draw(st.sampled_from(DAMAGE + BENIGN))
    return kind, source, op, draw(st.integers(0, 10**6)), draw(st.booleans())


def test_c_damaged_real_profiles_are_said_never_crash(tmp_path_factory):
    models = tmp_path_factory.mktemp("fuzz-models")
    llama = H.copy_model("llama", models) if H.transformers_models() else None
    config = H.REPO / "examples" / "llama3.2-1b-en" / "config.json"

    failures: list[str] = []
    @seed(H.seed())
    @settings(max_examples=H.share(0.25), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(profile_mutations())
    def one(mutation):
        kind, source, op, n, with_src = mutation
        work = Path(tempfile.mkdtemp(prefix="cbp-prof-"))
        try:
            src = H.SAMPLES / source
            text = src.read_bytes().decode("utf-8")
            if op in BENIGN:
                new = _benign(text, op)
            elif kind == "csv":
                new = _damage_csv(text, op, n)
            else:
                new = _damage_trace(text, op, n)
            path = work / src.name
            path.write_bytes(new.encode("utf-8"))
            args = ["prefetch", "analyze", str(path), "--json", "--out", str(work / "out")]
            if with_src and llama is not None:
                args += ["--model-src", str(llama), "--model-config", str(config)]
            run = H.cli(args)
            outcome = run.kind
            said = next((ln for ln in run.output.splitlines() if "error" in ln), run.output[-200:])
            detail = f"{source} {op} n={n} src={with_src}: {said}"
            if run.kind == "ok" and op in DAMAGE:
                doc = json.loads(run.stdout)       # --json: the document alone on stdout
                skipped = (doc.get("profile") or {}).get("rows_skipped") or 0
                if not skipped:
                    outcome, detail = "silent", f"{source} {op} n={n} src={with_src}: exit 0, rows_skipped 0"
            H.TALLY.add("profile", outcome, run.seconds, detail)
            if outcome in H.BAD:
                failures.append(f"{outcome}: {detail}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    one()
    assert not failures, "\n".join(failures[:10])
