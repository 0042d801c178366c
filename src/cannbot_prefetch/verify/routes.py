"""The switch turned on the way a user turns it, each route on a freshly built model: the
environment switch alone (`CANNBOT_PREFETCH=1` while the factory builds the model) and, with the
built-in factory, `<switch.config_path>: true` at the top level of the config alone. Every site
of the plan must then fire on every module that holds its weight (how often is `fires`' check,
verify/runs.py); a site that does not is a failed check naming it (the switch did not reach it:
a sub-config, a layer built without a config, a class with no `__init__`). The flip on one
built model (runner.set_switch) proves outputs unchanged; this proves the switch reaches every
site."""

from __future__ import annotations

import contextlib
import os
from typing import Callable

from ..errors import InputError
from ..plan import Plan
from ..contract.plan import ENV_SWITCH
from .checks import Check, call_with, expected_weights, failed_run


@contextlib.contextmanager
def env_switch(value: str | None):
    """The environment switch set to `value` (None: unset) while the block runs."""
    saved = os.environ.pop(ENV_SWITCH, None)
    if value is not None:
        os.environ[ENV_SWITCH] = value
    try:
        yield
    finally:
        os.environ.pop(ENV_SWITCH, None)
        if saved is not None:
            os.environ[ENV_SWITCH] = saved


def route_check(route: str, build: Callable[[], tuple], plan: Plan, rec) -> Check:
    """Build with `build()` (the switch set by `route` only), run once, and check every site
    fires on every module that holds its weight."""
    import torch

    rec.calls.clear()
    try:    # the factory may run the model while it builds it (a prefill for the cache)
        model, inputs = build()
        if hasattr(model, "eval"):
            model.eval()
        rec.calls.clear()
        with torch.no_grad():
            call_with(model, inputs)
    except InputError:
        raise                     # the factory or the plan is unusable: exit 2, not a finding
    except Exception as exc:  # noqa: BLE001 - a site that fails at run time is the finding
        rec.calls.clear()
        run = failed_run(exc, plan)
        return Check(f"switch by {route}", False, run.detail, run.site)
    exp = expected_weights(model, plan)
    fired = {id(c.weight) for c in rec.calls}
    held: dict[str, int] = {sid: 0 for sid in exp.per_site}   # per site: weights held
    seen: dict[str, int] = {}     # per site: those prefetched at all
    for tid, (sid, _) in exp.by_tensor.items():
        held[sid] += 1
        seen[sid] = seen.get(sid, 0) + (tid in fired)
    silent = [f"{sid} ({seen.get(sid, 0)} of {n})" for sid, n in held.items()
              if seen.get(sid, 0) < n]
    rec.calls.clear()
    if silent:
        return Check(f"switch by {route}", False,
                     f"the switch set by {route} alone does not reach: " + ", ".join(silent))
    return Check(f"switch by {route}", True,
                 f"set by {route} alone, all {len(exp.per_site)} site(s) fire on every module "
                 f"that holds their weight")


def route_checks(plan: Plan, build: Callable[[], tuple],
                 build_config_on: Callable[[], tuple] | None, rec) -> list[Check]:
    """The environment route, and the config route when the factory can set the config."""
    with env_switch("1"):
        checks = [route_check(f"environment ({ENV_SWITCH}=1)", build, plan, rec)]
    if build_config_on is None:
        checks.append(Check("switch by config", True, "skipped: a user factory builds its own "
                            f"config; set `{plan.switch.config_path}: true` at its top level",
                            skipped=True))
    else:
        with env_switch(None):
            checks.append(route_check(f"config (`{plan.switch.config_path}: true` at the top "
                                      f"level)", build_config_on, plan, rec))
    return checks
