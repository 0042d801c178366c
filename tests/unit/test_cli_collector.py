"""The CLI turns the cyclic garbage collector off for the commands that read profiles or rewrite
source (cli._collector_off), and leaves it on for `verify`, which runs the user's model."""

from __future__ import annotations

import gc

import pytest

from cannbot_prefetch.cli import _collector_off


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("argv, off", [
    (["prefetch", "analyze", "p"], True),
    (["prefetch", "report", "--plan", "x"], True),
    (["prefetch", "apply", "x"], True),
    (["prefetch", "verify", "--plan", "x"], False),
])
def test_collector_per_command(collector, argv, off):
    _collector_off(argv)
    assert gc.isenabled() is not off
