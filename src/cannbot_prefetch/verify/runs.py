"""How often each planned weight is run in one forward, and in which steps: what `fires` expects.

The seed (003, "代码实现指南" 2.) places a prefetch after its dependency and before the target, to
hide the weight's read; a second read of the weight in the same step comes right after the first
and is an L2 question, not a second prefetch. So the unit is a *step*: one call of the module that
calls the target's module (the innermost model module whose forward is running when the target's
module is called). A decoder layer run twice per forward (a recurrent model: iquest_loopcoder's
`loop_num` passes over the layers, hrm_text's H/L cycles) makes two steps, and its site must fire
twice, each time before that step's first run; a target called twice inside one layer call
(gemma3n's `modality_router`, from `predict` and from `correct`) makes one step, and its site
fires once, before the first run.

Runs are counted with forward pre-hooks on every module of the model (a module called through
`.forward(...)` is not seen; a weight whose module never ran, read by another module as vLLM's
LogitsProcessor reads the LM head, keeps one prefetch per module).
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Run:
    """One call of a module that holds a planned weight."""

    before: int      # prefetch calls recorded before this run (its place among them)
    step: int        # the call of the module that called it (0: no model module was running)
    caller: str      # that module's class name ("" for step 0)
    order: int       # its place among all runs of the forward


@dataclass
class Runs:
    """Per holder module (by id): its runs in one forward, in order."""

    of: dict[int, list[Run]] = field(default_factory=dict)

    def of_all(self, holders) -> list[Run]:
        """The runs of every module in `holders` (a weight two modules share), in order."""
        return sorted((r for h in holders for r in self.of.get(id(h), ())), key=lambda r: r.order)


@contextlib.contextmanager
def counting(model, holders, calls: list):
    """Count the runs of `holders` while the block runs the model. `calls` is the recorder's
    list of prefetch calls (its length at a run places the run among the prefetches)."""
    runs = Runs()
    watched = {id(h) for h in holders}
    stack: list[tuple[int, str]] = []     # (call id, class name) of the module forwards running
    ids = itertools.count(1)
    order = itertools.count()

    def pre(mod, args):
        if id(mod) in watched:
            step, caller = stack[-1] if stack else (0, "")
            runs.of.setdefault(id(mod), []).append(Run(len(calls), step, caller, next(order)))
        stack.append((next(ids), type(mod).__name__))

    def post(mod, args, out):
        if stack:
            stack.pop()

    handles = []
    try:
        for m in model.modules():
            handles.append(m.register_forward_pre_hook(pre))
            handles.append(m.register_forward_hook(post, always_call=True))
        yield runs
    finally:
        for h in handles:
            h.remove()


def steps(runs: list[Run]) -> list[list[Run]]:
    """The runs grouped by step, in the order each step first ran the target."""
    grouped: dict[int, list[Run]] = {}
    for r in runs:
        grouped.setdefault(r.step if r.step else -1 - r.order, []).append(r)
    return list(grouped.values())


def judge(runs: list[Run], fired_at: list[int]) -> tuple[int, str | None]:
    """(prefetches wanted, what is wrong or None) for one weight: `runs` of its modules in one
    forward, `fired_at` the indices of its prefetch calls among all recorded calls.

    Wanted: one per step (one per module when its module never ran: the plain rule). Each step's
    first run must follow a prefetch issued since the previous step's last run; with exactly as
    many prefetches as steps, that is one per step, none wasted."""
    if not runs:
        return 1, None
    groups = steps(runs)
    last = 0
    for k, group in enumerate(groups, 1):
        first = group[0].before
        if not any(last <= j < first for j in fired_at):
            who = f"a call of {group[0].caller}" if group[0].caller else "outside the model"
            return len(groups), (f"step {k} of {len(groups)} ({who}) ran the target with no "
                                 f"prefetch since the previous step")
        last = group[-1].before
    if len(fired_at) > len(groups):
        most = max(groups, key=len)
        return len(groups), (f"{len(fired_at)} prefetches for {len(groups)} step(s): the target "
                             f"runs {len(most)} time(s) in one call of "
                             f"{most[0].caller or 'the model'}, and its prefetch belongs before "
                             f"the first run only, once per step")
    return len(groups), None
