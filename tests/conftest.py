"""Shared test fixtures. Real profiling samples are read from ../shared/profiling-samples
(never copied into the repo); tests that need them skip with the reason when it is absent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = Path(os.environ.get("CANNBOT_SAMPLES", REPO.parent / "shared" / "profiling-samples"))
EXAMPLES = REPO / "examples"

# The example generators (examples/synth) and the matrix generator (tests/matrix/decodegen)
# are plain packages, importable by tests.
for _path in (EXAMPLES, REPO / "tests" / "matrix"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


@pytest.fixture(scope="session")
def samples() -> Path:
    """Root of the real profiling samples; skips the test when the folder is absent."""
    if not SAMPLES.is_dir():
        pytest.skip(f"real profiling samples not found at {SAMPLES} "
                    "(set CANNBOT_SAMPLES or check out shared/ beside the repo)")
    return SAMPLES


# ---------------------------------------------------------------- the fuzz/fault suite's size

def pytest_addoption(parser):
    parser.addoption("--fuzz-n", type=int, default=None,
                     help="fuzz/fault suite: inputs to try (default small; env CANNBOT_FUZZ_N)")
    parser.addoption("--fuzz-kills", type=int, default=None,
                     help="fuzz/fault suite: SIGKILLs during apply --write (env CANNBOT_FUZZ_KILLS)")


def pytest_configure(config):
    fuzz_dir = Path(__file__).resolve().parent / "fuzz"
    if str(fuzz_dir) not in sys.path:
        sys.path.insert(0, str(fuzz_dir))
    import fuzz_harness
    fuzz_harness._config.update(n=config.getoption("--fuzz-n"), kills=config.getoption("--fuzz-kills"))


def pytest_terminal_summary(terminalreporter):
    """One line with what the fuzz/fault suite tried and what came out (when it ran)."""
    harness = sys.modules.get("fuzz_harness")
    if harness is not None and (sum(harness.TALLY.inputs.values()) or harness.TALLY.kills):
        terminalreporter.write_line(harness.TALLY.line())
        for line in harness.TALLY.bad[:20]:
            terminalreporter.write_line(f"  {line}")
