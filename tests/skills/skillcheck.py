"""Checks that keep the agent skills honest: front matter, evals.json, and every `cannbot ...`
command line and `--flag` the text mentions, walked against the real Typer/Click command tree.

Pure functions over text, so the tests can feed them a temporary skill and prove that a flag
that does not exist is caught.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
FRONT_MATTER_KEYS = {"name", "description", "user-invocable", "license", "allowed-tools",
                     "metadata", "compatibility"}
EXPECTATION_TYPES = {"skill_activated", "contains", "not_contains", "regex", "tool_called",
                     "file_exists"}
# Command lines of other tools: their flags are not ours to check.
FOREIGN = {"msprof", "python", "python3", "pip", "pytest", "torchrun", "bash", "git", "export",
           "npu-smi", "msprof-analyze"}
FLAG = re.compile(r"(?<![\w\-])(--[a-z][a-z0-9\-]*)")
CANNBOT = re.compile(r"(?<![\w\-/.])cannbot(?=\s)")


# ---------------------------------------------------------------------------------- front matter
def split_front_matter(text: str) -> tuple[dict, str]:
    if not text.startswith("---\n"):
        raise ValueError("SKILL.md must start with a '---' front matter block")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ValueError("front matter block is not closed with '---'")
    data = yaml.safe_load(text[4:end])
    if not isinstance(data, dict):
        raise ValueError("front matter is not a YAML mapping")
    return data, text[end + 5:]


def front_matter_errors(skill_dir: Path) -> list[str]:
    try:
        fm, body = split_front_matter((skill_dir / "SKILL.md").read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as err:
        return [str(err)]
    errs = []
    name = fm.get("name")
    if name != skill_dir.name:
        errs.append(f"name {name!r} does not equal the folder name {skill_dir.name!r}")
    if not isinstance(name, str) or not KEBAB.match(name) or len(name) > 64:
        errs.append(f"name {name!r} is not kebab-case (a-z, 0-9, single hyphens, <= 64 chars)")
    desc = fm.get("description")
    if not isinstance(desc, str) or not desc.strip():
        errs.append("description is missing or empty")
    elif len(desc) > 1024:
        errs.append(f"description is {len(desc)} chars (limit 1024)")
    if fm.get("user-invocable") is not True:
        errs.append("user-invocable: true is required (cannbot-skills)")
    unknown = set(fm) - FRONT_MATTER_KEYS
    if unknown:
        errs.append(f"unknown front matter keys: {sorted(unknown)}")
    if not body.strip():
        errs.append("SKILL.md has no body")
    return errs


def evals_errors(skill_dir: Path) -> list[str]:
    path = skill_dir / "evals" / "evals.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return [f"{path}: {err}"]
    errs = []
    if doc.get("skill_name") != skill_dir.name:
        errs.append(f"skill_name {doc.get('skill_name')!r} != {skill_dir.name!r}")
    if not isinstance(doc.get("eval_mode"), str):
        errs.append("eval_mode missing")
    evals = doc.get("evals")
    if not isinstance(evals, list) or not evals:
        return errs + ["evals must be a non-empty list"]
    ids = [e.get("id") for e in evals]
    if len(set(ids)) != len(ids):
        errs.append(f"duplicate eval ids: {ids}")
    for e in evals:
        where = f"eval {e.get('id')!r}"
        for key, typ in (("id", int), ("title", str), ("prompt", str), ("expected_output", str),
                         ("files", list), ("expectations", list), ("config", dict)):
            if not isinstance(e.get(key), typ):
                errs.append(f"{where}: {key} must be {typ.__name__}")
        exps = e.get("expectations") or []
        for x in exps:
            if not isinstance(x, dict) or x.get("type") not in EXPECTATION_TYPES \
                    or not isinstance(x.get("pattern"), str) or not isinstance(x.get("description"), str):
                errs.append(f"{where}: bad expectation {x!r}")
        if not any(isinstance(x, dict) and x.get("type") == "skill_activated"
                   and x.get("pattern") == skill_dir.name for x in exps):
            errs.append(f"{where}: no skill_activated expectation for {skill_dir.name}")
    return errs


def link_errors(md: Path) -> list[str]:
    """Relative Markdown links must point at files that exist."""
    errs = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (md.parent / target).exists():
            errs.append(f"{md.name}: link to missing file {target}")
    return errs


# ---------------------------------------------------------------------------------- CLI tree
@dataclass
class CliTree:
    """The command tree as plain data: path tuple -> option names, groups, unbuilt commands."""

    options: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    groups: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    unbuilt: set[tuple[str, ...]] = field(default_factory=set)

    @property
    def all_flags(self) -> set[str]:
        return set().union(*self.options.values()) if self.options else set()


def load_tree() -> CliTree:
    import typer

    from cannbot_prefetch.cli import app

    tree = CliTree()

    def walk(cmd, path):
        opts = {"--help"}
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option":
                opts.update(p.opts)
                opts.update(p.secondary_opts)
        tree.options[path] = opts
        if hasattr(cmd, "commands"):            # a group (Typer vendors click: duck typing)
            tree.groups[path] = set(cmd.commands)
            for name, sub in cmd.commands.items():
                walk(sub, path + (name,))
        elif "not built yet" in (cmd.help or "").lower():
            tree.unbuilt.add(path)

    walk(typer.main.get_command(app), ("cannbot",))
    return tree


# ---------------------------------------------------------------------------------- extraction
def _logical_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, inside a fenced code block); backslash continuations joined."""
    out, fenced, buf, start = [], False, "", 0
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if buf:
            buf += " " + line.strip()
        else:
            buf, start = line, no
        if fenced and buf.rstrip().endswith("\\"):
            buf = buf.rstrip()[:-1]
            continue
        out.append((start, buf, fenced))
        buf = ""
    if buf:
        out.append((start, buf, fenced))
    return out


def _spans(line: str, fenced: bool) -> list[str]:
    """Code the line holds: the whole line in a fence, else each `inline code` span."""
    if fenced:
        return [line.split(" #", 1)[0]]
    return re.findall(r"`([^`]+)`", line)


def command_lines(text: str) -> list[tuple[int, str]]:
    """Every `cannbot ...` command the text shows, with its line number."""
    found = []
    for no, line, fenced in _logical_lines(text):
        for span in _spans(line, fenced):
            for m in CANNBOT.finditer(span):
                found.append((no, span[m.start():].strip()))
    return found


def prose_flags(text: str) -> list[tuple[int, str]]:
    """Every --flag outside the command lines of other tools (msprof, python, ...)."""
    found = []
    for no, line, fenced in _logical_lines(text):
        pieces = _spans(line, fenced) if fenced else [line]
        if not fenced:
            # drop inline spans that are another tool's command line
            for span in re.findall(r"`([^`]+)`", line):
                if span.split() and span.split()[0] in FOREIGN:
                    pieces = [pieces[0].replace(f"`{span}`", "")]
        for piece in pieces:
            words = piece.split()
            if fenced and words and words[0] in FOREIGN:
                continue
            found.extend((no, f) for f in FLAG.findall(piece))
    return found


def _tokens(cmd: str) -> list[str]:
    try:
        toks = shlex.split(cmd)
    except ValueError:
        toks = cmd.split()
    out = []
    for t in toks:
        if t in ("|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<") or t.startswith(("2>", ">")):
            break                                   # a shell pipe or redirect ends the command
        t = t.strip("[](){},;；，。、")
        if t == "":
            continue
        out.append(t)
    return out


def check_command(tree: CliTree, cmd: str) -> tuple[list[str], list[str]]:
    """(errors, skipped reasons) for one `cannbot ...` command line."""
    return _check_from(tree, ("cannbot",), _tokens(cmd)[1:], cmd)


def _check_from(tree: CliTree, path: tuple[str, ...], toks: list[str], cmd: str):
    errors: list[str] = []
    i = 0
    while path in tree.groups and i < len(toks):
        tok = toks[i]
        if tok in ("...", "…"):
            return errors, []                       # `cannbot ...`: any command, nothing to check
        if tok.startswith("-"):
            name = tok.split("=", 1)[0]
            if name not in tree.options[path]:
                errors.append(f"{' '.join(path)}: no option {name} (in: {cmd})")
            i += 1
            continue
        alts = tok.split("|")
        if len(alts) > 1:
            errs, skips = [], []
            for alt in alts:
                e, s = _check_from(tree, path, [alt] + toks[i + 1:], cmd)
                errs += e
                skips += s
            return errors + errs, skips
        if tok not in tree.groups[path]:
            errors.append(f"{' '.join(path)}: no sub-command {tok!r} (in: {cmd})")
            return errors, []
        path = path + (tok,)
        i += 1
    if path in tree.unbuilt:
        return errors, [f"{' '.join(path)} is not built yet (in: {cmd})"]
    for tok in toks[i:]:
        if tok in ("...", "…"):
            continue
        if tok.startswith("--") or re.fullmatch(r"-[A-Za-z]", tok):
            name = tok.split("=", 1)[0]
            if name not in tree.options[path]:
                errors.append(f"{' '.join(path)}: no option {name} (in: {cmd})")
    return errors, []


def check_text(tree: CliTree, text: str, where: str = "", *, prose: bool = True
               ) -> tuple[list[str], list[str]]:
    """All command-line (and, with `prose`, prose-flag) problems of a text: (errors, skipped)."""
    errors, skipped = [], []
    for no, cmd in command_lines(text):
        e, s = check_command(tree, cmd)
        errors += [f"{where}:{no}: {x}" for x in e]
        skipped += [f"{where}:{no}: {x}" for x in s]
    known = tree.all_flags
    for no, flag in (prose_flags(text) if prose else []):
        if flag not in known:
            msg = f"{where}:{no}: {flag} is not an option of any cannbot command"
            (skipped if tree.unbuilt else errors).append(msg)
    return errors, skipped
