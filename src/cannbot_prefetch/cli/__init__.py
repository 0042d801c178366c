"""The `cannbot` console script. Typer only: parse, call pipeline, render, exit code. No logic.

One module per command keeps the seams apart (analyze.py, apply.py, verify.py, report.py,
hardware.py); this module holds the app, the shared options and the error boundary.
"""

from __future__ import annotations

import sys
import traceback
from typing import Annotated, Callable, TypeVar

import typer

from ..errors import CannbotError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="cannbot tools for Ascend NPU inference.")
prefetch = typer.Typer(
    no_args_is_help=True,
    help="Profile-driven weight prefetch (torch_npu.npu_prefetch): analyze, apply, verify, report.",
)
app.add_typer(prefetch, name="prefetch")

# Shared options (CONTRACTS.md: global --debug, --json, --lang on every command).
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout, nothing else.")]
LangOpt = Annotated[str, typer.Option("--lang", help="Language of human text: en or zh.")]

T = TypeVar("T")


def guarded(debug: bool, fn: Callable[[], T]) -> T:
    """Run a command body: a CannbotError becomes one line on stderr and its exit code."""
    try:
        return fn()
    except CannbotError as err:
        if debug:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(err.exit_code) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as err:  # a bug, not a user mistake: still one line unless --debug
        if debug:
            traceback.print_exc()
        print(f"internal error: {type(err).__name__}: {err} (rerun with --debug and report it)",
              file=sys.stderr)
        raise typer.Exit(2) from None


def make_console(stderr: bool = False, **kw):
    """A Rich console; when the stream is not a terminal (a pipe, a file, a CI log), lines are
    not wrapped at 80 columns, so tables stay readable and a printed diff stays a diff."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, **kw)
    return Console(stderr=stderr, width=160, soft_wrap=True, **kw)


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """`--steps A:B` (inclusive) -> (A, B); None when not given."""
    from ..errors import InputError

    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.split(":", 1))
    except ValueError:
        raise InputError(f"--steps must look like A:B (e.g. 2:5), not {text!r}") from None
    if b < a:
        raise InputError(f"--steps {text}: the end is before the start")
    return (a, b)


def check_lang(lang: str) -> str:
    if lang not in ("en", "zh"):
        print(f"error: --lang must be en or zh, not {lang!r}", file=sys.stderr)
        raise typer.Exit(2)
    return lang


def _register() -> None:
    # Imported for their @prefetch.command side effect; each module owns one command.
    from . import analyze, apply, hardware, report, verify  # noqa: F401


_register()


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # `cannbot ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        raise SystemExit(0) from None
