"""`PYTHONPATH=tests/matrix python -m decodegen OUT [--model M] [--hardware P] [--batch B]
[--context S] [--tp N] [--steps K] [--seed X] [--model-src FILE]`, or `--matrix NAME|all`:
write GENERATED profiles (and config.json) under OUT and print what was written."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import MATRIX, Spec, generate
from .configs import CONFIGS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="decodegen", description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--matrix", help=f"a matrix profile name or 'all' ({', '.join(MATRIX)})")
    ap.add_argument("--model", choices=list(CONFIGS), default="llama-3.2-1b")
    ap.add_argument("--hardware", default="910B3")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-src")
    a = ap.parse_args(argv)
    if a.matrix:
        names = list(MATRIX) if a.matrix == "all" else [a.matrix]
        specs = {n: MATRIX[n] for n in names}
    else:
        specs = {"": Spec(a.model, a.hardware, a.batch, a.context, a.tp, a.steps, a.seed, a.model_src)}
    for n, s in specs.items():
        g = generate(s, Path(a.out) / n)
        print(f"{g.profile}\n  {s.label}\n  config {g.config_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
