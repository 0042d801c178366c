"""Write the CLI reference (docs/cli.md and the skill's references/cli.md) from the Typer app.

    python docs/gen_cli_reference.py          # rewrite both files
    python docs/gen_cli_reference.py --check  # exit 1 when a file is out of date

The reference is generated, never hand-edited, so it cannot drift from the commands:
tests/skills/test_skills.py checks that every command and option is in it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import typer

REPO = Path(__file__).resolve().parents[1]
TARGETS = {
    REPO / "docs" / "cli.md": "en",
    REPO / "skills" / "model-infer-prefetch" / "references" / "cli.md": "zh",
}

INTRO = {
    "en": ("# CLI reference: `cannbot prefetch`\n\n"
           "Generated from the Typer app by `docs/gen_cli_reference.py`; do not edit by hand.\n"
           "`-h`/`--help` on every command; `cannbot --version`. Every command takes `--json` (a\n"
           "machine-readable result on stdout, nothing else on stdout; on a failure, usage errors\n"
           "included, the object `{\"error\": {\"code\", \"kind\", \"message\", \"path\"?}}` with\n"
           "`code` = the exit code), `--lang en|zh` and `--debug` (show a traceback). Exit codes: 0\n"
           "done; 1 a check did not pass (`apply --check` with pending changes, `verify` with a\n"
           "failure: said in one line, not as an error; `apply` meeting another plan's sites or a\n"
           "concurrent apply, nothing written); 2 unusable input (nothing written); 3 `report`\n"
           "written with a mismatch banner. A closed pipe (`cannbot ... | head`) exits 0.\n"
           "Slow steps show a status line on stderr when stderr is a terminal.\n\n"
           "## Languages\n\n"
           "`--lang zh` translates, from one catalog (`configs/messages.yaml`, the only place the\n"
           "package keeps Chinese text): every command's console lines and tables, the CLI's own\n"
           "errors and the usage-error line, apply / verify messages, progress, the design document,\n"
           "the report and its console summary, and a one-line gloss of each `reason_code`.\n"
           "The sentences the analysis stores in the plan and the JSON (a rejection's `reason`, cap\n"
           "notes, window reasons, verdict evidence, analyze's notes, the hardware's `detected_from`)\n"
           "are written in English from `said.*` catalog entries (`i18n.said`); the Chinese design and\n"
           "report re-word each from the entry it came from (`i18n.localize`, its parameters the same\n"
           "way, lists joined with 、), so they read as Chinese prose with full-width marks:\n"
           "`tests/unit/report/test_zh_prose.py` measures ≥ 95 % Chinese (0.99 on the examples; every\n"
           "branch of the verdict evidence, compute-, latency-bound and borderline included, has no English\n"
           "prose word, and so does a GENERATED design where no MatMul is memory-bound). In the\n"
           "Chinese report the hardware numbers' sources are named, not quoted: `cannbot prefetch\n"
           "hardware show NAME` prints each with its English citation. These stay English: `--help`\n"
           "texts and this reference; Typer's usage-error wording after \"错误：\"; errors raised inside\n"
           "the stages (readers, plan validation, the rewriter), which quote files, sites and code;\n"
           "a reader's or mapping's note that has no `said.*` entry yet (analyze's console notes are\n"
           "re-worded like the documents where one exists; so is a `reason` on the console, after the\n"
           "Chinese gloss), verify's check details; JSON keys and values; terms of art (MatMul,\n"
           "HBM, L2, roofline, max_size, op type names, cap names).\n"),
    "zh": ("# 命令参考：`cannbot prefetch`\n\n"
           "由 `docs/gen_cli_reference.py` 从 Typer 应用自动生成，请勿手改（选项说明为英文原文）。\n"
           "每个命令都支持 `-h`/`--help`；`cannbot --version` 显示版本。每个命令都支持 `--json`\n"
           "（stdout 只输出 JSON；失败时，包括用法错误，输出 `{\"error\": {\"code\", \"kind\",\n"
           "\"message\", \"path\"?}}`，`code` 即退出码）、`--lang en|zh`、`--debug`（显示堆栈）。\n"
           "退出码：0 完成；1 检查未通过（`apply --check` 有待写改动、`verify` 有失败项，只输出一行\n"
           "说明，不算错误；`apply` 遇到另一方案的插入点或并发的 apply，什么都不写）；2 输入不可用（什么都不写）；3 `report` 已写但带不匹配横幅。stdout 管道\n"
           "被关闭（`cannbot ... | head`）时退出码为 0。耗时步骤在 stderr 为终端时显示进度。\n\n"
           "## 语言\n\n"
           "`--lang zh` 翻译的内容都来自同一个词条文件 `configs/messages.yaml`（包内唯一存放中文的地方）：\n"
           "各命令的终端输出与表格、CLI 自身的错误与用法错误行、apply / verify 的提示、进度、方案文档、\n"
           "报告及其终端摘要，以及每个 `reason_code` 的一行中文说明。保持英文的部分：`--help` 说明与本参考；\n"
           "“错误：”之后 Typer 的用法错误原文；各阶段内部（读取、计划校验、改写器）抛出的错误，它们引用\n"
           "文件、位置和代码；analyze 的 `note:` 行、`reason` 句子（中文说明之后）和 verify 的检查详情；\n"
           "JSON 的键和值。\n"),
}


# Typer ships its own copy of click, so classes are told apart by duck typing, not isinstance.
def is_group(cmd) -> bool:
    return hasattr(cmd, "commands")


def is_option(p) -> bool:
    return getattr(p, "param_type_name", "") == "option"


def _walk(cmd, path: list[str]):
    yield path, cmd
    if is_group(cmd):
        order = ["analyze", "apply", "verify", "report", "hardware", "list", "show", "calibrate"]
        for name in sorted(cmd.commands, key=lambda n: (order.index(n) if n in order else 99, n)):
            yield from _walk(cmd.commands[name], path + [name])


def _type(p, ctx) -> str:
    if is_option(p) and p.is_flag:
        return "flag"
    try:
        shown = p.display_type(ctx)
    except Exception:  # noqa: BLE001 - older/newer Typer: the type name is only decoration
        shown = ""
    shown = str(shown).strip("<>").lower()
    return {"str": "text", "list[str]": "text", "integer": "int"}.get(shown, shown)


def _default(p) -> str:
    d = p.default
    if d is None or d == [] or d == () or (is_option(p) and p.is_flag and not d):
        return ""
    if callable(d):
        return ""
    return f"`{d}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def render(lang: str) -> str:
    from cannbot_prefetch.cli import app

    root = typer.main.get_command(app)
    out = [INTRO[lang]]
    for path, cmd in _walk(root, ["cannbot"]):
        if is_group(cmd) or len(path) < 3:
            continue
        ctx = typer.Context(cmd, info_name=" ".join(path))
        out.append(f"\n## `{' '.join(path)}`\n")
        out.append(f"```\n{cmd.get_usage(ctx).strip()}\n```\n")
        if cmd.help:
            out.append(_cell(cmd.help.split("\n\n")[0]) + "\n")
        args = [p for p in cmd.params if not is_option(p)]
        opts = [p for p in cmd.params if is_option(p)]
        if args:
            out.append("\n| argument | required | help |\n|---|---|---|")
            for a in args:
                out.append(f"| `{a.name.upper()}` | {'yes' if a.required else 'no'} | "
                           f"{_cell(getattr(a, 'help', ''))} |")
        if opts:
            out.append("\n| option | type | default | help |\n|---|---|---|---|")
            for o in opts:
                names = ", ".join(f"`{n}`" for n in o.opts + o.secondary_opts)
                rep = " (repeatable)" if o.multiple else ""
                out.append(f"| {names} | {_type(o, ctx)}{rep} | {_default(o)} | {_cell(o.help)} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a file is out of date")
    args = ap.parse_args(argv)
    stale = []
    for path, lang in TARGETS.items():
        text = render(lang)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    for p in stale:
        print(f"out of date: {p.relative_to(REPO)} (run python docs/gen_cli_reference.py)",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
