"""`cannbot prefetch report` (not built yet: see the open issue)."""

from __future__ import annotations

import sys

import typer

from . import prefetch


@prefetch.command("report", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def report() -> None:
    """Not built yet."""
    print("error: 'cannbot prefetch report' is not built yet", file=sys.stderr)
    raise typer.Exit(2)
