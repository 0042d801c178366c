"""What the skills, docs and outputs point at exists in an installed package, and they cite only
what ships (issue 9): no `REFERENCE.md §5`, "seed 003", "seed table 3b" — the rule in words and
a shipped doc (docs/sources.md) instead.

The wheel force-includes configs/, docs/ and skills/ into `cannbot_prefetch/` (pyproject.toml);
these tests read that mapping and resolve every path the texts name against it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "src" / "cannbot_prefetch"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

# Citations of documents a user does not have (the team's steering files).
UNSHIPPED = re.compile(r"REFERENCE(\.md)?\s*§|REFERENCE\.md|seed 003|seed table|the seed's|"
                       r"seed step|\.\./shared/|shared/docs/")
# Paths a text may name: shipped folders (docs/, configs/, skills/) or package paths.
PATH = re.compile(r"(?<![\w./-])((?:docs|configs|skills|cannbot_prefetch|src/cannbot_prefetch|"
                  r"examples)/[\w./-]*[\w/])")


def _shipped() -> dict[str, str]:
    """Repository folder -> installed folder, from the wheel's force-include table."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = data["tool"]["hatch"]["build"]["targets"]["wheel"]
    out = {src: dest for src, dest in wheel.get("force-include", {}).items()}
    for pkg in wheel.get("packages", []):
        out[pkg] = "cannbot_prefetch"
    return out


def test_docs_configs_and_skills_ship_in_the_wheel():
    ship = _shipped()
    assert ship.get("configs") == "cannbot_prefetch/configs"
    assert ship.get("docs") == "cannbot_prefetch/docs"
    assert ship.get("skills") == "cannbot_prefetch/skills"


def _installed_exists(path: str) -> bool:
    """Does `path`, as a text names it, exist in an installed copy?"""
    path = path.rstrip("./")
    if path.startswith("cannbot_prefetch/"):
        rest = path[len("cannbot_prefetch/"):]
        for folder in ("docs", "configs", "skills"):
            if rest == folder or rest.startswith(folder + "/"):
                return (REPO / rest).exists()
        return (PKG / rest).exists()
    if path.split("/")[0] in ("docs", "configs", "skills"):
        return (REPO / path).exists()
    return False                      # src/... and examples/... are repository-only paths


def _user_texts() -> list[Path]:
    texts = [*REPO.glob("skills/**/*.md"), *REPO.glob("docs/*.md"), *REPO.glob("configs/**/*.yaml")]
    return sorted(texts)


@pytest.mark.parametrize("path", _user_texts(), ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_texts_cite_only_what_ships(path):
    if path.name == "contracts.md":      # says where the team's shared contract lives
        text = re.sub(r"`shared/docs/CONTRACTS\.md`", "", path.read_text(encoding="utf-8"))
    else:
        text = path.read_text(encoding="utf-8")
    bad = [m.group(0) for m in UNSHIPPED.finditer(text)]
    assert bad == [], f"{path.name} cites {bad}"


@pytest.mark.parametrize("path", sorted(REPO.glob("skills/**/*.md")), ids=lambda p: str(p.relative_to(REPO)))
def test_paths_named_by_the_skills_exist_in_an_installed_package(path):
    text = path.read_text(encoding="utf-8")
    missing = sorted({m.group(1) for m in PATH.finditer(text) if not _installed_exists(m.group(1))})
    assert missing == [], f"{path.name} names {missing}"


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants that can reach a user (docstrings excluded: they are for developers,
    except a command's, which is its --help: cli/ docstrings are kept)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    if "cli" not in path.parts:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_outputs_and_help_cite_only_what_ships():
    """Every string the package can print or write (catalog, help, messages, designs, reports)."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        for line, text in _literals(path):
            if UNSHIPPED.search(text):
                bad.append(f"{path.relative_to(PKG)}:{line}: {text[:80]!r}")
    assert bad == []


def test_paths_named_by_outputs_exist_in_an_installed_package():
    found = set()
    for path in sorted(PKG.rglob("*.py")):
        for _, text in _literals(path):
            found |= {m.group(1) for m in PATH.finditer(text)}
    found |= {m.group(1) for m in PATH.finditer((REPO / "configs" / "messages.yaml").read_text(encoding="utf-8"))}
    missing = sorted(p for p in found if not _installed_exists(p))
    assert missing == []


def test_negative_a_made_up_citation_and_path_are_caught():
    assert UNSHIPPED.search("Benefit model (REFERENCE.md §5)")
    assert UNSHIPPED.search("window rule (seed table 3b)")
    assert not UNSHIPPED.search("Benefit model (docs/sources.md)")
    assert not _installed_exists("docs/no-such-page.md")
    assert not _installed_exists("examples/cpu-tiny-llama/run.py")
    assert _installed_exists("docs/sources.md") and _installed_exists("cannbot_prefetch/schemas")


# ---------------------------------------------------------------------------------- flags
FLAG = re.compile(r"(?<![\w\-])(--[a-z][a-z0-9\-]*)")
# git's own flags (rewrite/files.py `_git_dirty`: status asked without project-configured commands)
FOREIGN_FLAGS = {"--porcelain", "--no-optional-locks", "--ignore-submodules", "--list",
                 "--name-only",
                 "--additional-config"}   # `vllm serve`'s, named by the design's switch route


def _output_texts() -> list[tuple[str, str]]:
    out = [(f"{p.relative_to(PKG)}:{line}", text) for p in sorted(PKG.rglob("*.py"))
           if p.name != "abscript.py" for line, text in _literals(p)]
    out.append(("configs/messages.yaml", (REPO / "configs" / "messages.yaml").read_text(encoding="utf-8")))
    for p in sorted(REPO.glob("examples/*/expected/**/*")):
        if p.suffix in (".md", ".json", ".yaml"):
            out.append((str(p.relative_to(REPO)), p.read_text(encoding="utf-8")))
    return out


def test_flags_named_by_outputs_exist():
    """A hint that names a flag (the issue's `include_warmup`) names a real option of a
    cannbot command; the A/B script's own flags are checked against the script it writes."""
    sys.path.insert(0, str(Path(__file__).parent))
    import skillcheck as sc
    from cannbot_prefetch.report.abscript import ab_script

    known = sc.load_tree().all_flags | FOREIGN_FLAGS
    ab_flags = set(re.findall(r'add_argument\("(--[a-z-]+)"', ab_script("p.yaml", "enable_prefetch")))
    bad = []
    for where, text in _output_texts():
        allowed = known | (ab_flags if "run_prefetch_ab" in text or "A/B" in text else set())
        bad += [f"{where}: {f}" for f in FLAG.findall(text) if f not in allowed]
    assert bad == []


def test_warmup_note_names_a_real_flag(tmp_path):
    from cannbot_prefetch import analyze

    doc = analyze(str(REPO / "examples" / "llama3.2-1b-en" / "profile")).to_json()
    note = next(n for n in doc["notes"] if "warm-up" in n)
    assert "include_warmup" not in note and "--steps 1:3" in note
