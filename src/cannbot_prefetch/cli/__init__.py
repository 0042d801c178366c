"""The `cannbot` console script. Typer only: parse, call the API (api/), render, exit code. No logic.

One module per command keeps the seams apart (analyze.py, apply.py, verify.py, report.py,
hardware.py); this module holds the app, the shared options and the error boundary: every
failure, usage errors included, is one line on stderr (in the `--lang` language) and, with
`--json`, the object `{"error": {"code", "kind", "message", "path"?}}` on stdout, with the exit
code (CONTRACTS.md "Commands"). Heavy modules are imported inside the commands, never here.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Callable, Sequence, TypeVar

import typer
from typer import _click  # Typer's own (vendored) click: its exceptions are these

from .. import __version__
from ..errors import CannbotError
from .context import Command, Group, shared

_CONTEXT = {"help_option_names": ["-h", "--help"]}


def _version(value: bool) -> None:
    if value:
        print(f"cannbot-prefetch {__version__}")
        raise typer.Exit(0)


VersionOpt = Annotated[bool, typer.Option(
    "--version", callback=_version, is_eager=True, help="Print the version and exit.")]


class _Root(Group):
    """The root group: turns usage errors, a closed pipe and Ctrl-C into the contract's exits,
    worded with the --json/--lang that Click recorded on the context (cli/context.py)."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False,
                              windows_expand_args=windows_expand_args, **extra)
            code = rv if isinstance(rv, int) else 0
            _flush()
        except _click.exceptions.NoArgsIsHelpError as err:
            print(err.format_message())   # `cannbot` alone: the help, not an error
            code = 0
        except _click.exceptions.ClickException as err:
            code = err.exit_code
            _usage_error(err, *shared(getattr(err, "ctx", None)))
        except typer.Abort:             # outside a command (none today): still one line
            code = 1
            print(_t("cli.aborted", "en"), file=sys.stderr)
        except OSError as err:          # BrokenPipeError included
            if not _is_epipe(err):
                raise
            code = _closed_pipe()
        except SystemExit as exc:       # Typer's help echo exits 1 on a closed pipe
            if not _is_epipe(exc.__context__):
                raise
            code = _closed_pipe()
        except KeyboardInterrupt:
            code = 130
        if standalone_mode:
            sys.exit(code)
        return code

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Abort, EOFError):   # a declined or closed prompt: one line, in --lang
            print(_t("cli.aborted", shared(ctx)[1]), file=sys.stderr)
            raise typer.Exit(1) from None


# Plain help and usage text (rich_markup_mode=None): Typer's Rich formatter costs ~0.1-0.2 s of
# imports before the first line of `-h` appears (issue 12 start-up). Commands still draw their
# own output with Rich.
PLAIN = {"rich_markup_mode": None}
app = typer.Typer(cls=_Root, add_completion=False, no_args_is_help=True, **PLAIN,
                  context_settings=_CONTEXT, help="cannbot tools for Ascend NPU inference.")
prefetch = typer.Typer(
    cls=Group, no_args_is_help=True, **PLAIN, context_settings=_CONTEXT,
    help="Profile-driven weight prefetch (torch_npu.npu_prefetch): analyze, apply, verify, report.",
)
app.add_typer(prefetch, name="prefetch")


@app.callback()
def _root(version: VersionOpt = False) -> None:
    """cannbot tools for Ascend NPU inference."""


@prefetch.callback()
def _prefetch(version: VersionOpt = False) -> None:
    """Profile-driven weight prefetch (torch_npu.npu_prefetch): analyze, apply, verify, report."""


# Shared options (CONTRACTS.md: global --debug, --json, --lang on every command).
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout, nothing else.")]


def _lang(value: str) -> str:
    if value not in ("en", "zh"):
        raise typer.BadParameter(_t("cli.lang_choice", "en", value=value))
    return value


LangOpt = Annotated[str, typer.Option("--lang", callback=_lang,
                                      help="Language of human text: en or zh.")]

T = TypeVar("T")


def _t(key: str, lang: str, **kw: Any) -> str:
    from ..i18n import t
    return t(key, lang if lang in ("en", "zh") else "en", **kw)


def error_text(err: CannbotError, lang: str) -> str:
    """One line: `path: message (hint)`, in `lang` where the message comes from the catalog."""
    from ..i18n import tr

    msg = " ".join(str(tr(err.message, lang)).split())
    text = f"{err.path}: {msg}" if err.path else msg
    if err.hint:
        hint = tr(err.hint, lang)
        text += f"（{hint}）" if lang == "zh" else f" ({hint})"
    return text


def json_error(code: int, kind: str, message: str, path: str | None = None) -> None:
    """The `--json` failure object on stdout (CONTRACTS.md)."""
    import json

    err: dict[str, Any] = {"code": code, "kind": kind, "message": message}
    if path:
        err["path"] = path
    sys.stdout.write(json.dumps({"error": err}, ensure_ascii=False) + "\n")


def _kind(err: Exception) -> str:
    import re
    name = type(err).__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _usage_error(err, as_json: bool, lang: str) -> None:
    message = " ".join(err.format_message().split())
    ctx = getattr(err, "ctx", None)
    where = ctx.command_path if ctx is not None else "cannbot"
    print(_t("cli.usage_error", lang, message=message, command=where), file=sys.stderr)
    if as_json:
        json_error(err.exit_code, "usage", message)


def guarded(debug: bool, fn: Callable[[], T], json_out: bool = False, lang: str = "en") -> T:
    """Run a command body: a CannbotError becomes one line on stderr (and, with `json_out`, the
    error object on stdout) and its exit code."""
    try:
        return fn()
    except CannbotError as err:
        return _refuse(err, debug, json_out, lang)
    except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
        raise
    except OSError as err:
        if err.errno == 32:         # EPIPE: the reader left (`| head`), handled by the root
            raise
        if err.filename is not None:   # disk full, a size limit, no permission: the file named
            from ..errors import InputError
            return _refuse(InputError(err.strerror or type(err).__name__, path=str(err.filename)),
                           debug, json_out, lang)
        return _internal(err, debug, json_out, lang)
    except Exception as err:  # a bug, not a user mistake: still one line unless --debug
        return _internal(err, debug, json_out, lang)


def _refuse(err: CannbotError, debug: bool, json_out: bool, lang: str):
    if debug:
        import traceback
        traceback.print_exc()
    text = _printable(error_text(err, lang))
    print(_t("cli.error", lang, text=text), file=sys.stderr)
    if json_out:
        json_error(err.exit_code, _kind(err), _printable(error_text(err, "en")) if lang == "en"
                   else text, err.path)
    raise typer.Exit(err.exit_code) from None


_CONTROL = {c: None for c in (*range(0x20), *range(0x7f, 0xa0))}


def _printable(text: str) -> str:
    """An error line may quote a file or a plan value: no control characters reach the terminal
    (an escape sequence could retitle or clear it)."""
    return text.translate(_CONTROL)


def _internal(err: Exception, debug: bool, json_out: bool, lang: str):
    if debug:
        import traceback
        traceback.print_exc()
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    print(_t("cli.internal_error", lang, text=text), file=sys.stderr)
    if json_out:
        json_error(2, "internal", text)
    raise typer.Exit(2) from None


def _flush() -> None:
    """Flush stdout inside the guard, so a reader that left shows up here, not at exit."""
    sys.stdout.flush()


def _is_epipe(err: BaseException | None) -> bool:
    return isinstance(err, OSError) and err.errno == 32


def _closed_pipe() -> int:
    """The reader of stdout left (`cannbot ... | head`): not an error (exit 0, no message).
    Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 0


def make_console(stderr: bool = False, **kw):
    """A Rich console; when the stream is not a terminal (a pipe, a file, a CI log), lines are
    not wrapped at 80 columns, so tables stay readable and a printed diff stays a diff. A closed
    pipe raises BrokenPipeError (the root exits 0), not Rich's own exit 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return _Console(stderr=stderr, **kw)
    return _Console(stderr=stderr, width=160, soft_wrap=True, **kw)


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """`--steps A:B` (inclusive) -> (A, B); None when not given."""
    from ..errors import InputError
    from ..i18n import Msg

    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.split(":", 1))
    except ValueError:
        raise InputError(Msg("cli.steps_format", text=text)) from None
    if b < a:
        raise InputError(Msg("cli.steps_order", text=text))
    return (a, b)


def _register() -> None:
    # Imported for their @prefetch.command side effect; each module owns one command.
    from . import analyze, apply, hardware, report, verify  # noqa: F401


_register()


def main() -> None:
    """The `cannbot` console script: run the CLI, which exits with the command's code."""
    app()
