#!/usr/bin/env python
"""Regenerate this example's GENERATED (not measured) decode profile.

    python examples/llama3.2-1b-en/make_profile.py [--hardware 910B3|910B4] [--out DIR]

Default output: profile/ for 910B3, profile-910b4/ for 910B4. See README.md and
examples/synth/timing.py for the formula.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from synth.cli import run  # noqa: E402

# What the committed profile was generated with (kept small enough to commit: see README.md).
OPTIONS = {"layers": None, "steps": 3, "decode_tokens": 1, "context_len": 1024, "stacks": "outer", "seed": 0}

if __name__ == "__main__":
    run(HERE, OPTIONS, sys.argv[1:])
