"""An Ascend trace_view's kernels and what launched each, as plain lists: the half of
trace_reader.py a second process computes (trace_ahead.py), so it imports no polars.

The kernels are the events of the "Ascend Hardware" process; the `async_npu` flow whose id is
a kernel's start names the launching host thread and time, whose nesting (trace_launch.py)
says the launch op, call stack and step.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..errors import InputError
from ..gc_pause import gc_paused
from .trace_events import Trace, load_trace
from .trace_launch import NONE4, host_threads


def stack_columns(path: Path, max_bytes: int) -> tuple[list, list, list, list, list] | None:
    """(start ns, name, stack code, launch op) of each named, undamaged kernel with a stack,
    and the distinct stacks a code indexes: plain lists, so a reader process can pipe them.
    None when it is not an Ascend trace."""
    with gc_paused():
        trace = load_trace(path, max_bytes)
        if trace.flavour != "ascend":
            return None
        x = trace.x
        kernels = kernel_rows(trace, path)
        launch, stacks = launcher(trace)
        starts, names, codes, ops = [], [], [], []
        for r in kernels:
            start, name = x.start[r], x.name[r]
            if x.bad[r] is not None or name is None:
                continue
            code, op, _, _ = launch(start)
            if code is not None:
                starts.append(start)
                names.append(name)
                codes.append(code)
                ops.append(op)
    return starts, names, codes, ops, list(stacks)


def hardware_pids(trace: Trace) -> set:
    return {pid for pid, name in trace.procs.items() if name == "Ascend Hardware"}


def kernel_rows(trace: Trace, path: Path) -> list[int]:
    """The rows of the "Ascend Hardware" process's events; InputError when there are none."""
    hardware = hardware_pids(trace)
    kernels = [r for r, pid in enumerate(trace.x.pid) if pid in hardware]
    if not kernels:
        raise InputError("trace holds no Ascend Hardware kernels", path=str(path))
    return kernels


def launcher(trace: Trace):
    """(launch(kernel start ns) -> (stack code, launch op, its input dims as written, step),
    the distinct stacks by code): the async_npu flow whose id is the kernel's start names the
    launching thread and time, that thread's nesting what enclosed the launch."""
    stacks: dict[str, int] = {}     # each distinct stack's text once; the column gathers it
    threads = host_threads(trace.x)
    flows = trace.flows

    def launch(start: int) -> tuple:
        flow = flows.get(start)
        if flow is not None:
            on = threads.get(flow[0])
            if on is not None:
                stack, op, dims, step = on.launch(flow[1])
                code = None if stack is None else stacks.setdefault(stack, len(stacks))
                return code, op, dims, step       # dims as written: join_stack() to show
        return NONE4
    return launch, stacks


@functools.lru_cache(maxsize=8192)    # asked per kernel; a trace has a few hundred names
def type_from_name(name: str) -> str | None:
    """aclnn kernels are `<api>_<tiling>_<OpType>`: the last part is the op type."""
    parts = name.split("_")
    if name.startswith("aclnn") and len(parts) >= 3 and parts[-1]:
        return parts[-1]
    return None
