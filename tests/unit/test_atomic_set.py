"""atomic.write_set (issue 33): an output set is written as a unit as far as renames allow, and
leftovers of a killed run are removed; an OSError names the file."""

from __future__ import annotations

import pytest

from cannbot_prefetch import atomic


def test_a_failure_while_writing_leaves_the_old_set_and_no_temps(tmp_path, monkeypatch):
    a, b = tmp_path / "report.md", tmp_path / "chart.png"
    a.write_text("old report")
    b.write_text("old chart")
    (tmp_path / f".report.md{atomic.TMP_MARK}left").write_text("a killed run's temp")
    real, calls = atomic._temp, []

    def failing(p, data, mode):
        calls.append(p)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(p))
        return real(p, data, mode)
    monkeypatch.setattr(atomic, "_temp", failing)
    with pytest.raises(OSError) as exc:
        atomic.write_set({a: "new report", b: b"new chart"})
    assert exc.value.filename == str(b)
    assert a.read_text() == "old report" and b.read_text() == "old chart"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png", "report.md"]


def test_the_set_is_written_and_leftovers_removed(tmp_path):
    a = tmp_path / "report.md"
    (tmp_path / f".report.md{atomic.TMP_MARK}left").write_text("x")
    assert atomic.write_set({a: "new", tmp_path / "n.yaml": "y: 1\n"}) == [str(a),
                                                                           str(tmp_path / "n.yaml")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.yaml", "report.md"]


def test_a_write_error_names_the_file(tmp_path, monkeypatch):
    target = tmp_path / "out.md"

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(atomic.os, "fchmod", full)
    with pytest.raises(OSError) as exc:
        atomic.write_atomic(target, "x")
    assert exc.value.filename == str(target) and not list(tmp_path.iterdir())
