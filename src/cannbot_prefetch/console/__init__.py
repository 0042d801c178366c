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
    from ..cli import main as run

    run()
