"""pipe_verdict (any timeline op's measured verdict from its four PipeUtilization ratios) on every
combination of GENERATED ratios around the policy thresholds: memory-bound when either side is,
else compute-bound when either side is, else latency-bound; the side named is the deciding one
(cube first on a tie), and explain=False gives the same verdict without words."""

from __future__ import annotations

import itertools

from cannbot_prefetch.roofline.verdict import Verdict, measured_verdict, pipe_verdict
from cannbot_prefetch.policy import Policy

POL = Policy.load()["verdict"]
VALUES = [None, 0.0, 0.05, 0.3, 0.5, 0.6, 0.9, 1.0]


def _sides(pipes):
    mac, mte2, vec, vmte2 = (v or 0.0 for v in pipes)
    out = []
    if mac or mte2:
        out.append(("aic", measured_verdict(mac, mte2, POL), mac, mte2))
    if vec or vmte2:
        out.append(("aiv", measured_verdict(vec, vmte2, POL), vec, vmte2))
    return out


def test_every_combination():
    for pipes in itertools.product(VALUES, repeat=4):
        sides = _sides(pipes)
        got, why = pipe_verdict(pipes, POL)
        assert pipe_verdict(pipes, POL, explain=False) == (got, "")
        if not sides:
            assert (got, why) == (None, "")
            continue
        verdicts = [v for _, v, _, _ in sides]
        want = (Verdict.MEMORY if Verdict.MEMORY in verdicts else
                Verdict.COMPUTE if Verdict.COMPUTE in verdicts else Verdict.LATENCY)
        assert got == want, pipes
        side, _, a, b = next(s for s in sides if s[1] == want)
        other = "mac" if side == "aic" else "vec"
        assert why == f"{side} mte2 {b:.2f}, {other} {a:.2f}", pipes
