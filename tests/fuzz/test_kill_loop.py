"""Fault suite: SIGKILL during `apply --write` and `apply --revert` on REAL transformers files.

The project: transformers' modeling_llama.py and modeling_qwen2.py (copied into a temp folder,
never committed), a runner YAML config, and one plan with sites in both files, so a write
touches two models, the shared helper, the config, the backups and the plan.

Each round runs the CLI in a child process that sends itself SIGKILL at a random point of the
write phase (the k-th Python or C call inside `write.commit`, k drawn from 1..the calls a full
write makes), or, for one round in five, the parent kills it after a random delay (anywhere,
start-up included). After every kill:
- each file is whole: a model is exactly its original or exactly its rewritten text, the config
  likewise, the helper absent or exactly its text, every backup exactly the original, the plan
  loads; only the tool's own temp files (`.*.cbp-tmp-*`) may be extra;
- no rewritten model without its helper (the helper is written first and removed last);
- the next run (`apply --write` or `--revert`) exits 0 and leaves the exact expected files, no
  temp file, and the plan's status matching the files.
"""

from __future__ import annotations

import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fuzz_harness as H
import kill_child
from cannbot_prefetch.plan import Plan, Switch, load_plan, save_plan, sha256_file
from cannbot_prefetch.atomic import TMP_MARK
from cannbot_prefetch.rewrite import write

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(H.transformers_models() is None, reason="transformers not installed")]

CHILD = [sys.executable, str(Path(__file__).with_name("kill_child.py")),
         "cannbot_prefetch.rewrite.write:commit,cannbot_prefetch.rewrite.write:settle"]

def _plan(sha_llama: str, sha_qwen: str) -> Plan:
    site = H.site_builder()
    return Plan(sites=(
        site("llama-gate", cls="LlamaMLP", attr="gate_proj", weight="self.mlp.gate_proj.weight",
             icls="LlamaDecoderLayer", anchor="self.mlp", dep="hidden_states", size=4096,
             max_tokens=64, sha=sha_llama, file="modeling_llama.py"),
        site("llama-down", cls="LlamaMLP", attr="down_proj", weight="self.down_proj.weight",
             icls="LlamaMLP", anchor="self.down_proj", dep="x", size=2048, sha=sha_llama,
             file="modeling_llama.py"),
        site("qwen2-o", cls="Qwen2Attention", attr="o_proj", weight="self.o_proj.weight",
             icls="Qwen2Attention", anchor="self.o_proj", dep="attn_output", size=4096,
             sha=sha_qwen, file="modeling_qwen2.py")),
        switch=Switch(config_path="custom_params.enable_prefetch", config_file="runner.yaml"))


MODELS = ("modeling_llama.py", "modeling_qwen2.py")
TRACKED = MODELS + ("runner.yaml",)


def _build(folder: Path) -> Path:
    for fam in ("llama", "qwen2"):
        H.copy_model(fam, folder)
    (folder / "runner.yaml").write_text("model_config:\n  custom_params:\n    batch: 1\n")
    save_plan(_plan(sha256_file(folder / MODELS[0]), sha256_file(folder / MODELS[1])),
              folder / "plan.yaml")
    return folder


def _states(tmp: Path) -> tuple[dict, dict, bytes]:
    """(original bytes, applied bytes, helper bytes) from a clean apply in a scratch copy."""
    scratch = _build(tmp / "scratch")
    original = {n: (scratch / n).read_bytes() for n in TRACKED}
    run = H.cli(["prefetch", "apply", str(scratch / "plan.yaml"), "--write", "--yes"])
    assert run.kind == "ok", run.output
    applied = {n: (scratch / n).read_bytes() for n in TRACKED}
    assert all(applied[n] != original[n] for n in TRACKED)
    return original, applied, (scratch / "_cannbot_prefetch.py").read_bytes()


def _child(proj: Path, unit: str, k: int, mode: str) -> subprocess.Popen:
    args = [str(proj / "plan.yaml"), "--yes"] + (["--revert"] if mode == "revert" else ["--write"])
    return subprocess.Popen([*CHILD, unit, str(k), "apply", *args], cwd=proj,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _events(proj: Path, unit: str, mode: str) -> int:
    p = _child(proj, unit, 0, mode)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return kill_child.events(err)


def _whole(proj: Path, original: dict, applied: dict, helper: bytes) -> list[str]:
    """What is wrong with the files right after a kill ([] = every file whole)."""
    wrong = []
    for n in TRACKED:
        data = (proj / n).read_bytes()
        if data not in (original[n], applied[n]):
            wrong.append(f"{n} is neither the original nor the rewritten file")
    h = proj / "_cannbot_prefetch.py"
    if h.exists() and h.read_bytes() != helper:
        wrong.append("the helper is half-written")
    if any((proj / n).read_bytes() == applied[n] for n in MODELS) and not h.exists():
        wrong.append("a rewritten model without its helper")
    for b in (proj / write.BACKUP_DIR).glob("*.bak") if (proj / write.BACKUP_DIR).is_dir() else []:
        name = b.name.rsplit(".", 2)[0]          # <file>.<stamp>.bak
        whole = (helper,) if name == "_cannbot_prefetch.py" else (original.get(name), applied.get(name))
        if b.read_bytes() not in whole:
            wrong.append(f"backup {b.name} is not a whole copy")
    try:
        load_plan(proj / "plan.yaml")
    except Exception as exc:  # noqa: BLE001 - any failure is what we report
        wrong.append(f"the plan does not load: {exc}")
    known = set(TRACKED) | {"plan.yaml", "_cannbot_prefetch.py"}
    for p in proj.iterdir():
        if p.is_file() and p.name not in known and TMP_MARK not in p.name:
            wrong.append(f"unexpected file {p.name}")
    return wrong


def _settled(proj: Path, want: dict, helper: bytes | None, status: str) -> list[str]:
    wrong = [f"{n} is not as expected" for n in TRACKED if (proj / n).read_bytes() != want[n]]
    h = proj / "_cannbot_prefetch.py"
    if (h.read_bytes() if h.exists() else None) != helper:
        wrong.append("the helper is not as expected")
    temps = [p.name for p in proj.rglob(f"*{TMP_MARK}*")]
    if temps:
        wrong.append(f"temp files left: {temps}")
    if load_plan(proj / "plan.yaml").status != status:
        wrong.append(f"plan status is not {status}")
    return wrong


def test_d_sigkill_during_apply_and_revert_leaves_whole_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)           # apply's default root: the folder it runs in
    original, applied, helper = _states(tmp_path)
    proj = _build(tmp_path / "proj")
    rng = random.Random(H.seed())
    events = {}
    for unit in ("io", "any"):
        events["apply", unit] = _events(proj, unit, "apply")
        assert not _settled(proj, applied, helper, "applied")
        events["revert", unit] = _events(proj, unit, "revert")
        assert not _settled(proj, original, None, "proposed")
    t_full = 3.0
    want, kills, rounds, failures = H.fuzz_kills(), 0, 0, []
    while kills < want and rounds < want * 4:
        rounds += 1
        mode = "apply" if (proj / MODELS[0]).read_bytes() == original[MODELS[0]] else "revert"
        # 70 %: before the k-th file system call of the write (open, write, fchmod, replace,
        # unlink, ...); 10 %: at the k-th call of any kind; 20 %: after a random delay
        draw = rng.random()
        timed = draw < 0.2
        unit = "any" if draw < 0.3 else "io"
        k = 0 if timed else rng.randint(1, events[mode, unit])
        start = time.monotonic()
        p = _child(proj, unit, k, mode)
        if timed:
            time.sleep(rng.uniform(0.0, t_full))
            p.send_signal(signal.SIGKILL)
        err = ""
        try:
            _, err = p.communicate(timeout=H.HANG_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            H.TALLY.add("kill", "hang", time.monotonic() - start, f"{mode} k={k}")
            failures.append(f"hang: {mode} k={k}")
            continue
        if p.returncode == -signal.SIGKILL:
            kills += 1
            H.TALLY.kills += 1
        elif p.returncode != 0:
            failures.append(f"{mode} k={k}: exit {p.returncode}: {(err or '').strip()[-400:]}")
        wrong = _whole(proj, original, applied, helper)
        # the next run finishes the job (the same direction half the time, else the other)
        direction = mode if rng.random() < 0.5 else ("revert" if mode == "apply" else "apply")
        args = ["prefetch", "apply", str(proj / "plan.yaml"), "--yes"]
        run = H.cli(args + (["--revert"] if direction == "revert" else ["--write"]))
        if run.kind != "ok":
            wrong.append(f"the next {direction} run: {run.kind}: {run.output.strip()[-300:]}")
        else:
            wrong += _settled(proj, applied if direction == "apply" else original,
                              helper if direction == "apply" else None,
                              "applied" if direction == "apply" else "proposed")
        outcome = "broken" if wrong else "ok"
        H.TALLY.add("kill", outcome, time.monotonic() - start,
                    f"{mode} {unit} k={k} timed={timed}: {'; '.join(wrong)}")
        if wrong:
            failures.append(f"{mode} {unit} k={k} timed={timed}: {'; '.join(wrong)}")
    H.TALLY.child_rss_mb = max(H.TALLY.child_rss_mb,
                               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    assert not failures, "\n".join(failures[:10])
    assert kills >= want, f"only {kills} of {want} kills landed in {rounds} rounds"
    # finally: revert gives back the original files byte for byte
    H.cli(["prefetch", "apply", str(proj / "plan.yaml"), "--revert", "--yes"])
    assert not _settled(proj, original, None, "proposed")
