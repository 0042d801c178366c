"""The reader fuzz suite (reader_fuzz.py) as a test: mutated real samples through the CLI.

Every case is a whole CLI process (~1 s of CPU), so CI runs a seeded sample that takes some of
every kind of damage (`READER_CI_N` cases); `--fuzz-n N` / CANNBOT_FUZZ_N runs N (all of them,
300+, with `--fuzz-n 400`), as does `python tests/fuzz/reader_fuzz.py`.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict

import pytest

import fuzz_harness
import reader_fuzz

pytestmark = [pytest.mark.slow, pytest.mark.samples]

READER_CI_N = 36


def _sample(cases, n: int, seed: int):
    """n cases, round-robin over the kinds of damage (seeded), so each kind is tried."""
    if n >= len(cases):
        return cases
    by_kind = defaultdict(list)
    for c in cases:
        by_kind[c.kind].append(c)
    rng = random.Random(seed)
    for v in by_kind.values():
        rng.shuffle(v)
    out, kinds = [], sorted(by_kind)
    while len(out) < n:
        for k in kinds:
            if by_kind[k] and len(out) < n:
                out.append(by_kind[k].pop())
    return out


def test_reader_fuzz(samples, tmp_path, capsys):
    cases = reader_fuzz.build(tmp_path / "inputs")
    assert len(cases) >= 300
    asked = fuzz_harness._config["n"] or os.environ.get("CANNBOT_FUZZ_N")
    run = _sample(cases, int(asked) if asked else READER_CI_N, fuzz_harness.seed())
    outcomes = reader_fuzz.run_all(run, tmp_path, jobs=2)
    failures = [f"[{o.case.kind}] {o.case.label}: {p}" for o in outcomes for p in o.problems]
    with capsys.disabled():
        print(f"\n{len(run)} of {len(cases)} cases: " + reader_fuzz.summary(outcomes))
    assert not failures, "\n".join(failures[:40])
