"""`cannbot prefetch apply` (not built yet: see the open issue)."""

from __future__ import annotations

import sys

import typer

from . import prefetch


@prefetch.command("apply", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def apply() -> None:
    """Not built yet."""
    print("error: 'cannbot prefetch apply' is not built yet", file=sys.stderr)
    raise typer.Exit(2)
