"""The reader fuzz suite (reader_fuzz.py) as a test: every mutated real sample through the CLI."""

from __future__ import annotations

import pytest

import reader_fuzz

pytestmark = [pytest.mark.slow, pytest.mark.samples]


def test_reader_fuzz(samples, tmp_path, capsys):
    cases = reader_fuzz.build(tmp_path / "inputs")
    assert len(cases) >= 300
    outcomes = reader_fuzz.run_all(cases, tmp_path, jobs=2)
    failures = [f"[{o.case.kind}] {o.case.label}: {p}" for o in outcomes for p in o.problems]
    with capsys.disabled():
        print("\n" + reader_fuzz.summary(outcomes))
    assert not failures, "\n".join(failures[:40])
