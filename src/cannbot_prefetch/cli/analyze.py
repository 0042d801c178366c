"""`cannbot prefetch analyze` (being built)."""

from __future__ import annotations

import sys

import typer

from . import prefetch


@prefetch.command("analyze", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def analyze() -> None:
    """Not built yet."""
    print("error: 'cannbot prefetch analyze' is not built yet", file=sys.stderr)
    raise typer.Exit(2)
