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
