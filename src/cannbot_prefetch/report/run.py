"""`report`'s inputs: read the plan, the profiles and verify.json, and build the ReportData.

Nothing is written here: api.Report renders every output in memory and writes them in one
explicit step, so unusable input (InputError, exit 2) leaves nothing behind; a mismatch is data
(`ReportData.banners`, status MISMATCH, exit 3 once the report is on disk).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..i18n import said
from ..plan import load_plan
from ..policy import Policy
from .build import ReportData, build_report, parse_verify


def _companions(profile) -> dict:
    from ..profiling.companions import read_step_times, read_l2_cache
    root = (profile.extras or {}).get("root") or profile.info.path
    return {"step_times": read_step_times(root), "l2_cache": read_l2_cache(root)}


def _readable_hw_file(name: str, plan_path) -> bool:
    """Whether a hardware file the plan names may be read: a part name always; a file only
    under the project root (apply's rule, rewrite/root.py), the shipped profiles or the
    user's calibrated ones (hardware.user_dir) - a plan may not make report read anything else."""
    from .. import hardware as hwmod
    from ..hardware.profiles import _is_file_ref
    from ..rewrite.root import project_root
    from ..settings import configs_dir

    if not _is_file_ref(name):
        return True
    if plan_path is None:
        return False
    real = Path(name).expanduser().resolve()      # as hardware.load reads it
    homes = (project_root(Path(plan_path)), (configs_dir() / "hardware").resolve(),
             hwmod.user_dir().resolve())
    return any(real.is_relative_to(h) for h in homes)


def plan_hardware(plan, hardware: str | None, info=None, plan_path=None, *,
                  policy: Policy | None = None):
    """The part the report computes with: `--hardware` when given, else the plan's
    (`created_from.hardware`, with the overrides analyze recorded), else detected from the
    baseline. `detected_from` says which, so report.md can name it. A file the plan names is
    read only where `_readable_hw_file` allows."""
    from dataclasses import replace

    from .. import hardware as hwmod

    planned = str((plan.created_from or {}).get("hardware") or "")
    if planned and not hardware and not _readable_hw_file(planned, plan_path):
        raise InputError(f"created_from.hardware {planned!r} is a file outside the project, "
                         "the shipped profiles and the calibrated ones: not read",
                         path=str(plan_path), hint="pass --hardware NAME or FILE.yaml")
    if hardware:
        hw = hwmod.resolve(hardware, info, policy=policy)
        also = f" (the plan was made for {planned})" if planned and not hw.matches(planned) else ""
        return replace(hw, detected_from=f"--hardware {hardware}{also}")
    if not planned:
        return hwmod.resolve(None, info, policy=policy)
    try:
        hw = hwmod.load(planned, policy=policy)
    except InputError:
        hw = None
    recorded = str((plan.created_from or {}).get("hardware_file") or "")
    if recorded and not _readable_hw_file(recorded, plan_path):
        recorded = ""
    if recorded and (hw is None or Path(hw.path or "").resolve() != Path(recorded).resolve()):
        try:
            hw = hwmod.load(recorded, policy=policy)
        except InputError:
            pass
    if hw is None:
        raise InputError(f"the plan's hardware {planned!r} (created_from.hardware) is not a known "
                         "part here", hint="pass --hardware NAME or FILE.yaml")
    over = (plan.created_from or {}).get("hardware_overrides") or {}
    peaks = {k.split(".", 1)[1]: float(v) for k, v in over.items() if k.startswith("peaks_tflops.")}
    hw = hw.with_overrides(hbm_bw_tbps=over.get("hbm_bw_tbps"), peaks=peaks or None,
                           cmo_bw_gbps=over.get("cmo_bw_gbps"))
    return replace(hw, detected_from=said("said.hw_from_plan",
                                          over=said("part.with_overrides") if over else ""))


def read_report(plan_path, baseline, *, optimized=None, verify_result=None, hardware=None,
                rank=None, steps=None, policy: Policy | None = None) -> ReportData:
    """The report's start: builds its Policy (unless given) and passes it to every step."""
    from ..profiling.load import load_profile

    pol = policy or Policy.load()
    plan = load_plan(plan_path, policy=pol)
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
    if baseline is None and optimized is not None:
        raise InputError("--optimized needs --baseline (the profile with the switch off)")
    base = load_profile(baseline, rank=rank, steps=steps, policy=pol) if baseline is not None else None
    opt = load_profile(optimized, rank=rank, steps=steps, policy=pol) if optimized is not None else None
    hw = plan_hardware(plan, hardware, base.info if base is not None else None, plan_path,
                       policy=pol)
    comps = {"baseline": _companions(base)} if base is not None else {}
    if opt is not None:
        comps["optimized"] = _companions(opt)
    return build_report(plan, str(plan_path), base, opt, hardware=hw, verify=verify,
                        policy=pol, companions=comps)
