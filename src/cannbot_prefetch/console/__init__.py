"""The `cannbot` console script's first step: keep what Python compiles between runs, then run
the CLI (cli.main). Installed here, before the CLI is imported, so its own modules and classes
are among what is kept (bytecode.py: this package's modules when Python writes no `.pyc`;
codecache.py: the code dataclasses generate). Only the console script starts here: the library
(api/) and `cannbot_prefetch.cli.main` leave the interpreter's import machinery as they find it.
"""

from __future__ import annotations

import sys


def main() -> None:
    from . import bytecode, codecache

    bytecode.install()
    codecache.install(command=codecache.command_of(sys.argv[1:]))
    _read_ahead(sys.argv[1:])
    from ..cli import main as run

    run()


def _read_ahead(argv: list[str]) -> None:
    """`prefetch analyze PROFILE ...`: the trace beside PROFILE's kernel table read from now on
    (profiling/trace_ahead.py), ~0.1 s before the CLI (typer) is imported and has parsed the
    command. The words are a guess, not the parse: the CLI starts its own reader once it has
    parsed them (trace_ahead.start), which keeps this one only when it reads the same file
    and stops it otherwise; anything unusual here (options first, a value in doubt, help)
    and none is started."""
    if argv[:2] != ["prefetch", "analyze"] or len(argv) < 3 or argv[2].startswith("-"):
        return
    opts: dict[str, str] = {}
    rest = argv[3:]
    for k, word in enumerate(rest):
        if word in ("--help", "-h", "--"):
            return
        name, eq, value = word.partition("=")
        if name in ("--rank", "--run"):
            if not eq:
                if k + 1 >= len(rest):
                    return
                value = rest[k + 1]
            opts[name] = value
    rank = opts.get("--rank")
    if rank is not None:
        if not (rank.isascii() and rank.isdigit()):
            return              # `all` reads no trace ahead; anything else the CLI refuses
        rank = int(rank)
    from ..profiling import trace_ahead

    trace_ahead.start(argv[2], rank=rank, run=opts.get("--run"))
