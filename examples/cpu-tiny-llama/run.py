"""The whole cannbot-prefetch workflow on a CPU, with no NPU: one command.

    python examples/cpu-tiny-llama/run.py --out /tmp/tiny            # default sizes
    python examples/cpu-tiny-llama/run.py --small --out /tmp/tiny    # seconds, for tests

Stages (each prints the command it runs and the files it wrote):

 1. prepare    copy model.py and config.json to OUT/src/ (the committed model.py is never edited)
 2. profile    decode steps of the copy under torch.profiler (record_shapes, with_stack, one
               ProfilerStep#N per decode step) -> OUT/trace/tiny_llama_decode.pt.trace.json
 3. calibrate  `cannbot prefetch hardware calibrate` -> a `cpu` hardware profile measured here
               (kept in OUT/hardware/ through $CANNBOT_HARDWARE_DIR, your ~/.config is untouched)
 4. analyze    roofline + windows + mapping + sizes -> OUT/plan/prefetch_plan.yaml, prefetch_design.md
 5. apply      the diff (no --write) -> OUT/apply_diff.patch, then `apply --write --yes` on the copy
 6. verify     switch off/on outputs and call order, with a stub torch_npu -> OUT/verify.json
 7. report     expected-gain report from the baseline trace -> OUT/report/report.md (+ chart,
               next-step plan, A/B script)

Honesty note: on a CPU there is no L2 prefetch engine. The stub torch_npu that `verify` installs
records the calls and does nothing, so the report can only give the *expected* gain from the
benefit model; measured gains need the A/B script on an Ascend NPU. What this example proves is
that every stage runs on a real PyTorch profile of a real model, and that the rewritten model
gives bit-identical outputs with the switch off and on.

Timing on a CPU is noisy: on a busy machine every op is stretched by preemption and the
roofline calls them all latency-bound. For a result that does not depend on the machine, analyse
the committed reference recorded on a quiet machine (reference/README.md) instead of profiling
live:

    python examples/cpu-tiny-llama/run.py --small --out /tmp/tiny \
        --trace examples/cpu-tiny-llama/reference/trace.pt.trace.json.gz \
        --hardware examples/cpu-tiny-llama/reference/cpu.yaml

Exit code: 0 when every stage did what it should, 1 otherwise - including when analyze plans no
site (apply/verify/report are then marked "stopped" and the reason is printed: the example
exists to show the whole chain). OUT/run_summary.json records each stage (command, exit code,
files, status).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = "modeling_tiny_llama"          # name of the copy under OUT/src/
FACTORY = f"{MODULE}:make_model_and_inputs"
STAGES = ("prepare", "profile", "calibrate", "analyze", "apply", "verify", "report")

# --small: a model that profiles in seconds on two shared cores.
SMALL = {"vocab_size": 2048, "hidden_size": 512, "intermediate_size": 1408,
         "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64}


@dataclass
class Stage:
    name: str
    command: list[str] = field(default_factory=list)
    rc: int | None = None
    status: str = "pending"   # ok | given (--trace/--hardware) | failed | skipped | stopped | not-built
    files: list[str] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0


def cannbot_argv() -> list[str]:
    """The `cannbot` console script of this interpreter's environment (or the module itself)."""
    exe = Path(sys.executable).with_name("cannbot")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("cannbot")
    if found:
        return [found]
    return [sys.executable, "-c", "from cannbot_prefetch.cli import main; main()"]


class Runner:
    def __init__(self, out: Path, lang: str):
        self.out = out
        self.lang = lang
        self.stages: list[Stage] = []
        self.env = dict(os.environ)
        # Calibrated hardware profiles go to OUT/hardware, not to the user's config folder.
        self.env["CANNBOT_HARDWARE_DIR"] = str(out / "hardware")
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(out / "src")] + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))

    def begin(self, name: str) -> Stage:
        st = Stage(name)
        self.stages.append(st)
        print(f"\n[{len(self.stages)}] {name}", flush=True)
        return st

    def cli(self, st: Stage, args: list[str], *, stdout_to: Path | None = None,
            ok_codes: tuple[int, ...] = (0,), input_text: str | None = None) -> subprocess.CompletedProcess:
        """Run `cannbot prefetch ARGS`; print the command, stderr, and the exit code."""
        argv = cannbot_argv() + ["prefetch"] + args
        st.command = ["cannbot", "prefetch"] + args
        print("  $ " + " ".join(_quote(a) for a in st.command), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, input=input_text)
        st.seconds = round(time.perf_counter() - t0, 2)
        st.rc = proc.returncode
        if stdout_to is not None:
            stdout_to.parent.mkdir(parents=True, exist_ok=True)
            stdout_to.write_text(proc.stdout, encoding="utf-8")
        elif proc.stdout.strip():
            print(_indent(proc.stdout.rstrip()), flush=True)
        if proc.stderr.strip():
            print(_indent(proc.stderr.rstrip()), flush=True)
        if "not built yet" in proc.stderr:
            st.status, st.detail = "not-built", proc.stderr.strip().splitlines()[-1]
        elif proc.returncode in ok_codes:
            st.status = "ok"
        else:
            st.status = "failed"
            st.detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        print(f"  -> exit {proc.returncode} ({st.status}, {st.seconds} s)", flush=True)
        return proc

    def wrote(self, st: Stage, *paths: Path) -> None:
        for p in paths:
            if p.exists():
                st.files.append(str(p))
                print(f"  wrote {p}", flush=True)
            elif st.status == "ok":
                st.status, st.detail = "failed", f"expected file missing: {p}"
                print(f"  MISSING {p}", flush=True)

    def skip(self, name: str, why: str, status: str = "skipped") -> None:
        st = self.begin(name)
        st.status, st.detail = status, why
        print(f"  {status}: {why}", flush=True)

    def summary(self) -> int:
        print("\nsummary", flush=True)
        for st in self.stages:
            rc = "-" if st.rc is None else st.rc
            print(f"  {st.name:<10} {st.status:<9} exit {rc:<4} {st.detail}", flush=True)
        path = self.out / "run_summary.json"
        path.write_text(json.dumps({"stages": [asdict(s) for s in self.stages]}, indent=2),
                        encoding="utf-8")
        print(f"  wrote {path}", flush=True)
        return 0 if all(s.status in ("ok", "given") for s in self.stages) else 1


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_./:=,+@%" for c in a) else repr(a)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# ---- stage 1: prepare ---------------------------------------------------------------------------
def prepare(r: Runner, small: bool) -> tuple[Path, Path]:
    st = r.begin("prepare")
    src = r.out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    model_copy = src / f"{MODULE}.py"
    shutil.copyfile(HERE / "model.py", model_copy)
    config = json.loads((HERE / "config.json").read_text(encoding="utf-8"))
    if small:
        config.update(SMALL)
    config_path = src / "config.json"
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    st.status = "ok"
    r.wrote(st, model_copy, config_path)
    return model_copy, config_path


# ---- stage 2: profile ---------------------------------------------------------------------------
def profile(r: Runner, model_copy: Path, steps: int, prompt_len: int) -> Path | None:
    st = r.begin("profile")
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile, schedule

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    spec = importlib.util.spec_from_file_location(MODULE, model_copy)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = mod
    spec.loader.exec_module(mod)
    cfg = mod.TinyLlamaConfig.from_json(model_copy.with_name("config.json"))
    model = mod.build_model(cfg)
    trace = r.out / "trace" / "tiny_llama_decode.pt.trace.json"
    trace.parent.mkdir(parents=True, exist_ok=True)
    print(f"  model: hidden {cfg.hidden_size}, intermediate {cfg.intermediate_size}, "
          f"{cfg.num_hidden_layers} layers, vocab {cfg.vocab_size}, {cfg.torch_dtype}; "
          f"prompt {prompt_len} tokens, {steps} profiled decode steps (+1 warm-up step)", flush=True)
    st.command = ["torch.profiler", f"record_shapes=True with_stack=True schedule(wait=1, warmup=1, active={steps})"]

    def export(prof):
        prof.export_chrome_trace(str(trace))

    cache = mod.KVCache(cfg.num_hidden_layers)
    ids = torch.arange(prompt_len).remainder(cfg.vocab_size).unsqueeze(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        logits = model(ids, cache)                      # prefill, outside the profiled steps
        token = logits[:, -1:].argmax(-1)
        sched = schedule(wait=1, warmup=1, active=steps, repeat=1)
        with torch_profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                           with_stack=True, on_trace_ready=export) as prof:
            for _ in range(steps + 2):                  # wait + warm-up + active: one ProfilerStep each
                logits = model(token, cache)
                token = logits[:, -1:].argmax(-1)
                prof.step()
    st.seconds = round(time.perf_counter() - t0, 2)
    st.rc = 0
    st.status = "ok" if trace.exists() else "failed"
    r.wrote(st, trace)
    return trace if trace.exists() else None


# ---- stage 3: calibrate -------------------------------------------------------------------------
def calibrate(r: Runner, seconds: float) -> bool:
    st = r.begin("calibrate")
    r.cli(st, ["hardware", "calibrate", "--seconds", f"{seconds:g}", "--json"],
          stdout_to=r.out / "hardware_cpu.json")
    if st.status == "ok":
        r.wrote(st, r.out / "hardware_cpu.json", *sorted((r.out / "hardware").glob("*.yaml")))
    return st.status == "ok"


# ---- stage 4: analyze ---------------------------------------------------------------------------
def analyze(r: Runner, trace: Path, model_copy: Path, config_path: Path, hw: str) -> Path | None:
    st = r.begin("analyze")
    plan_dir = r.out / "plan"
    result = r.out / "analyze.json"
    r.cli(st, ["analyze", str(trace), "--hardware", hw, "--model-src", str(model_copy),
               "--model-config", str(config_path), "--out", str(plan_dir), "--lang", r.lang,
               "--json"], stdout_to=result)
    if st.status != "ok":
        return None
    r.wrote(st, result)
    doc = json.loads(result.read_text(encoding="utf-8"))
    mem = [s for s in doc.get("signatures", []) if s.get("verdict") == "memory-bound"]
    print(f"  {len(doc.get('signatures', []))} MatMul-family signatures, {len(mem)} memory-bound; "
          f"{len(doc.get('candidates', []))} candidate(s), {len(doc.get('rejections', []))} "
          f"rejection(s)", flush=True)
    for rej in doc.get("rejections", [])[:5]:
        print(f"    rejected {rej.get('signature', '')}: [{rej.get('reason_code')}] {rej.get('reason')}",
              flush=True)
    plan = plan_dir / "prefetch_plan.yaml"
    if not plan.exists():
        st.status, st.detail = "failed", f"analyze exited 0 but wrote no {plan}"
        return None
    r.wrote(st, plan, plan_dir / "prefetch_design.md")
    planned = [c for c in doc.get("candidates", []) if c.get("planned")]
    for c in doc.get("candidates", []):
        w = c.get("window") or {}
        print(f"    {'planned' if c.get('planned') else 'listed '} {c.get('target')}: window "
              f"{w.get('branch')} {w.get('ops')} {w.get('time_us')} us, max_size {c.get('max_size')} B "
              f"(bound by {c.get('bound_by')}){'' if c.get('planned') else ' - ' + str(c.get('reason'))}",
              flush=True)
    if not planned:
        # The workflow's honest exit: nothing is forced into the model. For this example it is a
        # failure all the same (it exists to show the chain), most often CPU timing noise.
        st.status = "stopped"
        st.detail = ("no site planned (no safe window / unmapped / not worth it): the workflow "
                     "stops here. On a busy machine CPU timings make every op latency-bound; "
                     "rerun on a quiet one, or analyse the committed reference (--trace/--hardware, "
                     "see reference/README.md)")
        print(f"  {st.detail}", flush=True)
        return None
    return plan


# ---- stage 5: apply -----------------------------------------------------------------------------
def apply(r: Runner, plan: Path, model_copy: Path) -> bool:
    st = r.begin("apply")
    preview = r.out / "apply_preview.json"
    # Preview: the design summary and the diff, nothing written. --json keeps the diff intact
    # (the Rich rendering is for a terminal); the unified diff goes to apply_diff.patch.
    r.cli(st, ["apply", str(plan), "--root", str(r.out), "--json"], stdout_to=preview)
    if st.status != "ok":
        return False
    doc = json.loads(preview.read_text(encoding="utf-8"))
    diff = r.out / "apply_diff.patch"
    diff.write_text("".join(f["diff"] for f in doc.get("files", []) if f.get("diff")), encoding="utf-8")
    print(_indent(diff.read_text(encoding="utf-8").rstrip()), flush=True)
    if doc.get("refused"):
        print(f"  refused: {doc['refused']}", flush=True)
    r.wrote(st, preview, diff)
    before = model_copy.read_text(encoding="utf-8")
    r.cli(st, ["apply", str(plan), "--root", str(r.out), "--write", "--yes"])
    if st.status != "ok":
        return False
    after = model_copy.read_text(encoding="utf-8")
    if after == before:
        st.status, st.detail = "failed", "apply --write left the model source unchanged"
        return False
    helper = model_copy.with_name("_cannbot_prefetch.py")
    r.wrote(st, model_copy, helper)
    n = after.count("# cannbot-prefetch:")
    print(f"  {model_copy.name}: {n} marked insertion(s); committed model.py untouched", flush=True)
    r.cli(st, ["apply", str(plan), "--root", str(r.out), "--check"])              # nothing pending now: exit 0
    return st.status == "ok"


# ---- stage 6: verify ----------------------------------------------------------------------------
def verify(r: Runner, plan: Path) -> Path | None:
    st = r.begin("verify")
    result = r.out / "verify.json"
    r.cli(st, ["verify", str(plan), "--factory", FACTORY, "--out", str(result)])
    if st.status != "ok":
        return None
    r.wrote(st, result)
    return result


# ---- stage 7: report ----------------------------------------------------------------------------
def report(r: Runner, plan: Path, trace: Path, verify_result: Path | None, hw: str) -> None:
    st = r.begin("report")
    rep_dir = r.out / "report"
    rep_dir.mkdir(parents=True, exist_ok=True)
    md = rep_dir / "report.md"
    args = ["report", "--plan", str(plan), "--baseline", str(trace), "--hardware", hw,
            "--out", str(md), "--lang", r.lang]
    if verify_result is not None:
        args += ["--verify-result", str(verify_result)]
    r.cli(st, args)
    if st.status == "ok":
        r.wrote(st, md, rep_dir / "report.roofline.png", rep_dir / "prefetch_plan.next.yaml",
                rep_dir / "run_prefetch_ab.py")


# ---- given inputs and the reference -------------------------------------------------------------
def given(r: Runner, name: str, what: str, path: str) -> None:
    st = r.begin(name)
    st.status, st.detail = "given", f"{what}: {path}"
    st.files.append(path)
    print(f"  given: {what} {path}", flush=True)


def record_reference(r: Runner, trace: Path, small: bool, dest: Path) -> None:
    """Keep this run's trace and calibrated profile as the reference the tests analyse."""
    import gzip
    import hashlib
    import platform

    dest.mkdir(parents=True, exist_ok=True)
    with open(trace, "rb") as src, gzip.GzipFile(dest / "trace.pt.trace.json.gz", "wb", mtime=0) as gz:
        shutil.copyfileobj(src, gz)
    shutil.copyfile(r.out / "hardware" / "cpu.yaml", dest / "cpu.yaml")
    meta = {"model_py_sha256": hashlib.sha256((HERE / "model.py").read_bytes()).hexdigest(),
            "config": "config.json + SMALL" if small else "config.json",
            "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
            "command": "python examples/cpu-tiny-llama/run.py " + " ".join(sys.argv[1:])}
    (dest / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"\nreference recorded in {dest}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created; its src/ is replaced)")
    ap.add_argument("--small", action="store_true", help="tiny sizes and few steps (seconds)")
    ap.add_argument("--steps", type=int, default=None, help="profiled decode steps (default 6, --small 3)")
    ap.add_argument("--prompt-len", type=int, default=16, help="prompt tokens before decoding")
    ap.add_argument("--calibrate-seconds", type=float, default=None,
                    help="time budget of `hardware calibrate` (default 3, --small 1)")
    ap.add_argument("--lang", choices=("en", "zh"), default="en", help="language of the documents")
    ap.add_argument("--trace", help="analyse this recorded trace instead of profiling live "
                    "(e.g. reference/trace.pt.trace.json.gz)")
    ap.add_argument("--hardware", help="use this part or hardware YAML instead of calibrating "
                    "(e.g. reference/cpu.yaml)")
    ap.add_argument("--until", choices=STAGES, help="stop after this stage")
    ap.add_argument("--record-reference", metavar="DIR",
                    help="after a live run, keep its trace and calibrated profile in DIR")
    args = ap.parse_args(argv)
    if args.record_reference and (args.trace or args.hardware):
        ap.error("--record-reference needs a live run (no --trace / --hardware)")

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    steps = args.steps or (3 if args.small else 6)
    cal_s = args.calibrate_seconds if args.calibrate_seconds is not None else (1.0 if args.small else 3.0)
    r = Runner(out, args.lang)
    print(f"cannbot-prefetch CPU example -> {out}\n(CPU: prefetch is a no-op stub here; the "
          f"report gives the expected gain, not a measured one)", flush=True)

    model_copy, config_path = prepare(r, args.small)
    if args.trace:
        given(r, "profile", "recorded trace", str(Path(args.trace).resolve()))
        trace: Path | None = Path(args.trace).resolve()
    else:
        trace = profile(r, model_copy, steps, args.prompt_len)
    if args.until == "profile":
        return r.summary()
    if args.hardware:
        hw_ref = str(Path(args.hardware).resolve()) if Path(args.hardware).is_file() else args.hardware
        given(r, "calibrate", "hardware", hw_ref)
        cal_ok = True
    else:
        hw_ref, cal_ok = "cpu", calibrate(r, cal_s)
    if args.record_reference and trace is not None and cal_ok:
        record_reference(r, trace, args.small, Path(args.record_reference).resolve())
    if args.until == "calibrate":
        return r.summary()
    plan = None
    if trace is None or not cal_ok:
        r.skip("analyze", "needs the trace and the calibrated cpu profile")
    else:
        plan = analyze(r, trace, model_copy, config_path, hw_ref)
    if plan is None:
        stopped = r.stages[-1].name == "analyze" and r.stages[-1].status == "stopped"
        for name in ("apply", "verify", "report"):
            if stopped:
                r.skip(name, "analyze planned no site: nothing to apply", status="stopped")
            else:
                r.skip(name, "needs a plan from analyze")
        return r.summary()
    if args.until == "analyze":
        return r.summary()
    applied = apply(r, plan, model_copy)
    verify_result = verify(r, plan) if applied else None
    if not applied:
        r.skip("verify", "needs the applied source")
    if args.until not in ("apply", "verify"):
        report(r, plan, trace, verify_result, hw_ref)
    return r.summary()


if __name__ == "__main__":
    sys.exit(main())
