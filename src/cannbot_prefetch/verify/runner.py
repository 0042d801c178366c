"""`verify PLAN --factory MODULE:FUNC`: run the rewritten model with the switch off and on, and
under torch.compile (capture.py).

FUNC() returns `(model, inputs)`; inputs are a dict (keyword arguments), a tuple (positional)
or one tensor. The switch is flipped on the built model (every module's `self.<switch>` and the
helper's module-level ENABLED), so one model serves both runs with the same weights; then the
switch is turned on the way a user does, on fresh models (routes.py: environment, config).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import write_atomic
from ..errors import InputError
from ..plan import Plan, call_form, load_plan
from ..rewrite.helper import PREFETCH_OPS
from .capture import capture_checks
from .checks import (Check, call_with, failed_run, capture_inputs, check_calls, expected_weights, graph_order,
                     layers_to_capture, outputs_equal)
from .routes import env_switch, route_checks
from .runs import counting

NPU_PREFETCH_OP = PREFETCH_OPS[1]          # npu::npu_prefetch, what the profiler names it
INSTALL_HINT = "install the optional extra: pip install 'cannbot-prefetch[torch]'"


@dataclass
class VerifyResult:
    plan: str
    factory: str
    stub: bool
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed or c.skipped for c in self.checks)

    def to_json(self) -> dict:
        return {"plan": self.plan, "factory": self.factory, "passed": self.passed,
                "torch_npu": "stub (recording, this process only)" if self.stub else "real",
                "checks": [c.to_json() for c in self.checks]}


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InputError("verify needs torch, which is not installed", hint=INSTALL_HINT) from None
    return torch


def helpers_of(model) -> list:
    out, seen = [], set()
    for m in model.modules():
        mod = sys.modules.get(type(m).__module__)
        h = getattr(mod, "_cbp", None) if mod is not None else None
        if h is not None and hasattr(h, "npu_prefetch") and id(h) not in seen:
            seen.add(id(h))
            out.append(h)
    return out


def set_switch(model, name: str, on: bool) -> int:
    """Flip the switch on a built model; returns how many modules carry it."""
    n = 0
    for m in model.modules():
        if name in vars(m):
            object.__setattr__(m, name, on)
            n += 1
    for h in helpers_of(model):
        h.ENABLED = on
    return n


@contextlib.contextmanager
def _recording():
    """(recorder, stub?, counted): the stub when torch_npu is not importable, else the real
    torch_npu with `npu_prefetch` wrapped to record eager calls. `counted(fn)` runs `fn` (a
    compiled model call) and returns (its result, prefetches issued)."""
    from .stub import Recorder, stub_torch_npu

    if importlib.util.find_spec("torch_npu") is None:
        with stub_torch_npu() as rec:
            def counted(fn):
                rec.calls.clear()  # the stub's kernel records, compiled or not
                out = fn()
                return out, len(rec.calls)

            yield rec, True, counted
        return
    import torch_npu  # a real NPU machine

    rec = Recorder()
    original = torch_npu.npu_prefetch

    def wrapped(*a, **k):
        rec.npu_prefetch(*a, **k)
        return original(*a, **k)

    def counted(fn):
        """Compiled code must see the op itself, not the Python wrapper: count the op's
        dispatches with the profiler, after a first call (compiling) outside it."""
        import torch

        torch_npu.npu_prefetch = original
        try:
            fn()
            with torch.autograd.profiler.profile() as prof:
                out = fn()
        finally:
            torch_npu.npu_prefetch = wrapped
        return out, sum(1 for e in prof.function_events if e.name == NPU_PREFETCH_OP)

    torch_npu.npu_prefetch = wrapped
    try:
        yield rec, False, counted
    finally:
        torch_npu.npu_prefetch = original


def verify_model(model, inputs, plan: Plan, *, graph: bool = True,
                 capture: bool = True) -> tuple[list[Check], bool]:
    """All checks on a built model; returns (checks, stub_used). `graph`: the per-layer make_fx
    order check; `capture`: the torch.compile checks (capture.py)."""
    torch = require_torch()
    checks: list[Check] = []
    if hasattr(model, "eval"):
        model.eval()
    name = plan.switch.name
    with _recording() as (rec, stub, counted), torch.no_grad():
        carriers = set_switch(model, name, False)
        helpers = helpers_of(model)
        if not helpers:
            checks.append(Check("helper", False, "the model's modules do not import the "
                                                 "cannbot-prefetch helper: was the plan applied?"))
            return checks, stub
        checks.append(Check("switch", True, f"{carriers} module(s) carry self.{name}; helper mode "
                                            f"{helpers[0].MODE}, call form "
                                            f"{getattr(helpers[0], 'CALL', None) or call_form(helpers[0].MODE)}"))
        off = call_with(model, inputs)
        checks.append(Check("switch off: no prefetch", not rec.calls,
                            "no npu_prefetch call" if not rec.calls else
                            f"{len(rec.calls)} call(s) with the switch off"))
        rec.calls.clear()
        exp = expected_weights(model, plan)
        set_switch(model, name, True)
        try:
            with counting(model, exp.all_holders(), rec.calls) as exp.runs:
                on = call_with(model, inputs)
        except Exception as exc:  # noqa: BLE001 - a site that fails at run time is the finding
            checks.append(failed_run(exc, plan))
            return checks, stub
        finally:
            set_switch(model, name, False)
        same, detail = outputs_equal(off, on)
        checks.append(Check("outputs off == on", same, detail))
        checks += check_calls(plan, exp, rec.calls)
        if graph:
            rec.calls.clear()
            set_switch(model, name, True)
            try:
                layer_name, layer, call = None, None, None
                for layer_name, layer in layers_to_capture(model, plan):
                    call = capture_inputs(layer, lambda: call_with(model, inputs))
                    if call is not None:      # a module the model calls (not another method)
                        break
                if call is None:
                    checks.append(Check("graph order", False, "no module of the planned classes ran"))
                else:
                    rec.calls.clear()
                    checks += graph_order(model, layer_name, layer, call, plan, rec)
            finally:
                set_switch(model, name, False)
        if capture:
            set_switch(model, name, True)
            try:
                form = getattr(helpers[0], "CALL", None) or call_form(helpers[0].MODE)
                checks += capture_checks(model, inputs, plan, off, exp, counted,
                                         lambda on: set_switch(model, name, on), form)
            finally:
                set_switch(model, name, False)
    return checks, stub


def load_factory(spec: str):
    if ":" not in spec:
        raise InputError(f"--factory must be MODULE:FUNC, not {spec!r}")
    mod_name, func = spec.split(":", 1)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        if mod_name.endswith(".py") or "/" in mod_name:
            path = Path(mod_name)
            s = importlib.util.spec_from_file_location(path.stem, path)
            if s is None or not path.is_file():
                raise InputError("factory file not found", path=str(path))
            module = importlib.util.module_from_spec(s)
            sys.path.insert(0, str(path.resolve().parent))
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise InputError(f"cannot import factory module {mod_name!r}: {exc}") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise InputError(f"factory {spec!r}: {mod_name} has no function {func}")
    return fn


def run_verify(plan_path, factory: str, *, out=None, built=None,
               built_config_on=None) -> VerifyResult:
    """`built`, when given, is called instead of importing `factory` (the built-in factory);
    `built_config_on` builds the same model with the switch set at the top of its config
    (routes.py: without it the config route is skipped, with the reason)."""
    require_torch()
    plan = load_plan(plan_path)
    fn = built if built is not None else load_factory(factory)

    def build():
        got = fn()
        if not (isinstance(got, tuple) and len(got) == 2):
            raise InputError(f"factory {factory!r} must return (model, inputs)")
        return got

    with env_switch(None):       # the flip below starts from a model built with the switch off
        model, inputs = build()
    checks, stub = verify_model(model, inputs, plan)
    with _recording() as (rec, _, _counted):
        checks += route_checks(plan, build, built_config_on, rec)
    result = VerifyResult(str(plan_path), factory, stub, checks)
    if out is not None:
        write_atomic(out, json.dumps(result.to_json(), indent=2) + "\n")
    return result
