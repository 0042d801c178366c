"""`cannbot prefetch hardware list | show NAME | calibrate [--out PATH]`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from . import PLAIN, Command, DebugOpt, Group, JsonOpt, LangOpt, guarded, make_console, prefetch

if TYPE_CHECKING:
    from rich.table import Table

    from ..hardware import HardwareProfile

hw_app = typer.Typer(cls=Group, no_args_is_help=True, **PLAIN,
                     help="Hardware profiles: list, show (every number with its source), calibrate.")
prefetch.add_typer(hw_app, name="hardware")

def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % (div // 1024 or 1) == 0:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _short(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}" if v >= 100 else f"{v:.4g}"


def _distinct_aliases(p: "HardwareProfile") -> list[str]:
    """Aliases other than the name, one per case-insensitive spelling."""
    seen = {p.name.lower()}
    out = []
    for a in p.aliases:
        if a.lower() not in seen:
            seen.add(a.lower())
            out.append(a)
    return out


def _list_json(profiles: list["HardwareProfile"]) -> list[dict[str, Any]]:
    return [{"name": p.name, "aliases": list(p.aliases), "vendor": p.vendor, "measured": p.measured,
             "cube_cores": p.cube_cores, "vector_cores": p.vector_cores, "freq_mhz": p.freq_mhz,
             "peaks_tflops": dict(p.peaks_tflops), "hbm_bw_tbps": p.hbm_bw_tbps,
             "l2_bytes": p.l2_bytes, "hbm_bytes": p.hbm_bytes, "cmo_bw_gbps": p.cmo_bw_gbps,
             "path": p.path} for p in profiles]


def _rows(p: "HardwareProfile") -> list[tuple[str, str, str]]:
    """(field, value, source) for every number of a profile."""
    src = p.sources
    rows = [
        ("cube_cores", _num(p.cube_cores), src.get("cube_cores", "")),
        ("vector_cores", _num(p.vector_cores), src.get("vector_cores", "")),
        ("freq_mhz", _num(p.freq_mhz), src.get("freq_mhz", "")),
    ]
    for key, value in p.peaks_tflops.items():
        unit = "TOPS" if key.startswith("int") else "TFLOPS"
        rows.append((f"peaks_tflops.{key}", f"{value:g} {unit}", src.get(f"peaks_tflops.{key}", "")))
    for key in sorted(k for k in src if k.startswith("peaks_tflops.")
                      and k.split(".", 1)[1] not in p.peaks_tflops):
        rows.append((key, "-", src[key]))      # a peak not written, and why (calibrate)
    rows += [
        ("hbm_bw_tbps", f"{p.hbm_bw_tbps:g} TB/s", src.get("hbm_bw_tbps", "")),
        ("hbm_bw_ini_tbps", "-" if p.hbm_bw_ini_tbps is None else f"{p.hbm_bw_ini_tbps:g} TB/s",
         src.get("hbm_bw_ini_tbps", "")),
        ("ridge (bf16)", f"{p.ridge('bf16'):.1f} FLOP/B", "peaks_tflops.bf16 / hbm_bw_tbps"),
        ("l2_bytes", _size(p.l2_bytes), src.get("l2_bytes", "")),
        ("hbm_bytes", _size(p.hbm_bytes), src.get("hbm_bytes", "")),
        ("cmo_bw_gbps", f"{p.cmo_bw_gbps:g} GB/s", src.get("cmo_bw_gbps", "")),
    ]
    return rows


def _text(lang: str) -> dict[str, str]:
    from ..i18n import texts
    return {**texts("hardware", lang), **texts("hardware.col", lang)}


def _show_table(p: "HardwareProfile", t: dict[str, str]) -> "Table":
    from rich.table import Table

    kind = t["measured"] if p.measured else t["shipped"]
    aliases = ", ".join(_distinct_aliases(p)) or "-"
    table = Table(title=f"{p.name} ({p.vendor}, {kind}; {t['aliases']}: {aliases})",
                  caption=p.path, show_lines=False)
    table.add_column(t["field"], no_wrap=True)
    table.add_column(t["value"], justify="right", no_wrap=True)
    table.add_column(t["source"], overflow="fold")
    for field, value, source in _rows(p):
        table.add_row(field, value, source)
    return table


@hw_app.command("list", cls=Command)
def list_cmd(as_json: JsonOpt = False, debug: DebugOpt = False, lang: LangOpt = "en") -> None:
    """Every known part (shipped, and calibrated in the user folder)."""
    def body() -> None:
        from rich import box
        from rich.table import Table

        from .. import hardware as hwmod

        t = _text(lang)
        profiles = hwmod.available()
        if as_json:
            print(json.dumps({"hardware": _list_json(profiles), "user_dir": str(hwmod.user_dir())},
                             indent=2))
            return
        table = Table(title="cannbot prefetch hardware", box=box.SIMPLE_HEAD, pad_edge=False,
                      collapse_padding=True)
        for col in (t["part"], t["cores"], t["mhz"], t["fp16"], t["int8"], t["hbm"], t["l2"]):
            table.add_column(col, justify="left" if col == t["part"] else "right", no_wrap=True)
        for p in profiles:
            fp16 = p.peaks_tflops.get("bf16", p.peaks_tflops.get("fp16", p.peaks_tflops.get("fp32")))
            label = f"{p.name} ({t['measured']})" if p.measured else p.name
            table.add_row(label, f"{_num(p.cube_cores)}/{_num(p.vector_cores)}", _num(p.freq_mhz),
                          _short(fp16), _short(p.peaks_tflops.get("int8")), f"{p.hbm_bw_tbps:.4g}",
                          "-" if p.l2_bytes is None else f"{p.l2_bytes / (1 << 20):g}")
        console = make_console()
        console.print(table)
        console.print(t["more"])

    guarded(debug, body, json_out=as_json, lang=lang)


@hw_app.command("show", cls=Command)
def show_cmd(name: Annotated[str, typer.Argument(help="Part name or alias, e.g. 910B3, Ascend910B3.")],
             as_json: JsonOpt = False, debug: DebugOpt = False, lang: LangOpt = "en") -> None:
    """One part: every number with its source."""
    def body() -> None:
        from .. import hardware as hwmod

        t = _text(lang)
        prof = hwmod.load(name)
        if as_json:
            doc = prof.to_yaml_dict()
            doc["path"] = prof.path
            doc["ridge_bf16"] = prof.ridge("bf16")
            print(json.dumps(doc, indent=2, ensure_ascii=False))
            return
        make_console().print(_show_table(prof, t))

    guarded(debug, body, json_out=as_json, lang=lang)


def _ref(prof: "HardwareProfile") -> str:
    """What to pass to --hardware: the name when the user folder holds the file, else its path
    (a profile written elsewhere is not found by name)."""
    from pathlib import Path

    from .. import hardware as hwmod
    in_user_dir = Path(prof.path).resolve().parent == hwmod.user_dir().resolve()
    return prof.name if in_user_dir else prof.path


@hw_app.command("calibrate", cls=Command)
def calibrate_cmd(
    out: Annotated[str | None, typer.Option("--out", help="YAML file or folder to write (default: the user folder).")] = None,
    seconds: Annotated[float, typer.Option("--seconds", help="Time budget of the measurement.")] = 3.0,
    as_json: JsonOpt = False, debug: DebugOpt = False, lang: LangOpt = "en",
) -> None:
    """Measure this host's matmul rate and memory bandwidth; write a `cpu` profile."""
    def body() -> None:
        from .. import hardware as hwmod

        t = _text(lang)
        print(t["calibrating"], file=sys.stderr)
        prof = hwmod.calibrate(out, seconds=seconds)
        if as_json:
            doc = prof.to_yaml_dict()
            doc["path"] = prof.path
            print(json.dumps(doc, indent=2, ensure_ascii=False))
            return
        console = make_console()
        console.print(_show_table(prof, t))
        console.print(t["written"].format(path=prof.path) + "; " + t["use"].format(ref=_ref(prof)))

    guarded(debug, body, json_out=as_json, lang=lang)
