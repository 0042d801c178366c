"""`report` end to end: read the inputs, build, render, write, then raise on a mismatch.

Order matters for the exit codes (CONTRACTS.md): every input is read and every output rendered
before the first file is written (exit 2 leaves nothing behind); a mismatch banner is raised as
ReportMismatch (exit 3) only after the report is on disk.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, ReportMismatch
from ..plan import load_plan
from ..settings import policy
from .build import build_report, data_to_json, parse_verify
from .output import render_outputs, write_outputs


def _companions(profile) -> dict:
    from ..profiling.companions import read_step_times, read_l2_cache
    root = (profile.extras or {}).get("root") or profile.info.path
    return {"step_times": read_step_times(root), "l2_cache": read_l2_cache(root)}


def run_report(plan_path, baseline, *, optimized=None, verify_result=None, out="report.md",
               lang="en", hardware=None, rank=None, steps=None):
    from .. import hardware as hwmod
    from ..profiling.load import load_profile

    plan = load_plan(plan_path)
    verify = None
    if verify_result is not None:
        vp = Path(verify_result)
        if not vp.is_file():
            raise InputError("verify result not found", path=str(vp))
        try:
            text = vp.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise InputError("verify result is not readable UTF-8 text", path=str(vp)) from None
        verify = parse_verify(text, str(vp))
    base = load_profile(baseline, rank=rank, steps=steps)
    opt = load_profile(optimized, rank=rank, steps=steps) if optimized is not None else None
    hw = hwmod.resolve(hardware, base.info)
    comps = {"baseline": _companions(base)}
    if opt is not None:
        comps["optimized"] = _companions(opt)
    data = build_report(plan, str(plan_path), base, opt, hardware=hw, verify=verify,
                        policy=policy(), companions=comps)
    out_path = Path(out)
    if out_path.exists() and out_path.is_dir():
        out_path = out_path / "report.md"
    outputs = render_outputs(data, out_path, lang)
    written = write_outputs(outputs)
    doc = data_to_json(data, {Path(p).name: p for p in written})
    if data.banners:
        err = ReportMismatch("; ".join(b.text for b in data.banners), path=str(out_path),
                             hint="report written with a mismatch banner")
        err.result = (data, written, doc)   # the CLI still shows the summary / JSON
        raise err
    return data, written, doc
