"""`--json` and `--lang` on the Click context, so the root can word any failure in them.

Every command declares both options (CONTRACTS.md "Commands"). A usage error (an unknown
option, a missing argument, `--lang fr`) stops Click before the command's values exist, yet the
contract wants that error in the asked language and, with `--json`, as the JSON error object.
So the command's own parse is asked again, by Click's parser, leniently (unknown options kept
aside, no callbacks, no conversion), and the two values are stored in `ctx.meta`, which every
context of one invocation shares; the root reads them there with `shared(err.ctx)`. No word of
the command line is read by anything but Click.
"""

from __future__ import annotations

from typing import Any

from typer import _click  # Typer's own (vendored) click: its classes and exceptions are these
from typer.core import TyperCommand, TyperGroup, TyperOption

_KEY = "cannbot.shared"      # ctx.meta: (as_json, lang) as this invocation gave them
LANGS = ("en", "zh")

# The two shared options as a group sees them: a group has no --json/--lang of its own, but a
# mistyped command name still owes the user the language and the JSON object they asked for.
_SHARED = (TyperOption(param_decls=["--json"], is_flag=True), TyperOption(param_decls=["--lang"]))


def shared(ctx: Any) -> tuple[bool, str]:
    """(as_json, lang) recorded on `ctx` (any context of the invocation), else (False, "en")."""
    meta = getattr(ctx, "meta", None) or {}
    return meta.get(_KEY, (False, "en"))


def _record(ctx: Any, as_json: Any, lang: Any) -> None:
    ctx.meta[_KEY] = (bool(as_json), lang if lang in LANGS else "en")


def _names(params: list) -> tuple[str | None, str | None]:
    json_name = next((p.name for p in params if "--json" in getattr(p, "opts", ())), None)
    lang_name = next((p.name for p in params if "--lang" in getattr(p, "opts", ())), None)
    return json_name, lang_name


def _recover(command: Any, ctx: Any, args: list[str]) -> None:
    """Parse `args` again with the command's parser in Click's resilient mode, unknown options
    ignored and words after a command name still read, and record --json/--lang as given."""
    quiet = _click.Context(command, parent=ctx.parent, info_name=ctx.info_name,
                           resilient_parsing=True)
    parser = command.make_parser(quiet)
    parser.ignore_unknown_options = True
    parser.allow_interspersed_args = True
    params = command.get_params(quiet)
    json_name, lang_name = _names(params)
    for option in _SHARED:
        if (option.name == "json" and json_name is None) or (option.name == "lang" and lang_name is None):
            option.add_to_parser(parser, quiet)
    opts, _, _ = parser.parse_args(list(args))
    _record(ctx, opts.get(json_name or "json"), opts.get(lang_name or "lang"))


class _Records:
    """Mixin: on a usage error, record the shared options before Click's error leaves."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        given = list(args)
        try:
            rest = super().parse_args(ctx, args)  # type: ignore[misc]
        except _click.exceptions.UsageError as err:
            _recover(self, ctx, given)
            err.ctx = err.ctx or ctx     # Click's parser leaves it out for a missing value
            raise
        json_name, lang_name = _names(self.get_params(ctx))  # type: ignore[attr-defined]
        if json_name is not None:
            _record(ctx, ctx.params.get(json_name), ctx.params.get(lang_name))
        return rest


class Command(_Records, TyperCommand):
    """A command whose --json/--lang reach the root's error wording."""


class Group(_Records, TyperGroup):
    """A group: also records them when the command name after it is unknown."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as err:
            _recover(self, ctx, args[1:])
            err.ctx = err.ctx or ctx
            raise
