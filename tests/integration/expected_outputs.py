"""Expected analyze + report outputs of the two language examples, and how to regenerate them.

    python tests/integration/expected_outputs.py            # rewrite examples/*/expected/
    python tests/integration/expected_outputs.py --check    # exit 1 when they differ

For each example this runs, through the real `cannbot` CLI:

    cannbot prefetch analyze PROFILE --model-src SRC --model-config config.json --out OUT --json [--lang]
    cannbot prefetch report --plan OUT/prefetch_plan.yaml --baseline PROFILE --out OUT/report/report.md --json [--lang]

SRC is the transformers `modeling_*.py` the generated call stacks name (the installed package;
the recording host's prefix is mapped with --src-map), or the example's own `model/` folder when
it has one. Volatile text is normalized before storing and comparing: the tool version, absolute
paths (repo, output folder, site-packages), sha256 digests and timestamps.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDING_SITE = "/usr/local/lib/python3.10/site-packages"   # examples/synth: the imaginary host


@dataclass(frozen=True)
class Example:
    name: str
    module: str          # transformers module whose modeling file the stacks name
    lang: str
    profile: str = "profile"
    subdir: str = "expected"

    @property
    def label(self) -> str:
        return f"{self.name}/{self.profile}"

    @property
    def dest(self) -> Path:
        return REPO / "examples" / self.name / self.subdir


EXAMPLES = (
    Example("llama3.2-1b-en", "llama", "en"),
    Example("qwen2.5-3b-zh", "qwen2", "zh"),
    Example("qwen2.5-3b-zh", "qwen2", "zh", profile="profile-910b4", subdir="expected/910b4"),
)
# Compared as text after normalization; the chart is binary and only checked to exist.
TEXT_FILES = ("analyze.json", "prefetch_plan.yaml", "prefetch_design.md", "prefetch_design.layer1.svg",
              "report/report.md",
              "report/prefetch_plan.next.yaml", "report/run_prefetch_ab.py", "report/report.json")
BINARY_FILES = ("report/report.roofline.png",)


def cannbot_argv() -> list[str]:
    exe = Path(sys.executable).with_name("cannbot")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from cannbot_prefetch.cli import main; main()"]


def site_packages() -> Path:
    import transformers

    return Path(transformers.__file__).resolve().parents[1]


def model_src(ex: Example) -> tuple[list[str], Path]:
    """(extra analyze args, the model source path)."""
    own = REPO / "examples" / ex.name / "model"
    if own.exists():
        return ["--model-src", str(own)], own
    src = site_packages() / "transformers" / "models" / ex.module / f"modeling_{ex.module}.py"
    return ["--model-src", str(src), "--src-map", f"{RECORDING_SITE}={site_packages()}"], src


def _source_lines() -> dict:
    path = REPO / "examples" / "synth" / "source_lines.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def pinned_transformers() -> str | None:
    return _source_lines().get("transformers_version")


def pinned_source_sha(ex: Example) -> str | None:
    """sha256 of the modeling file the generated stacks were made from (examples/synth)."""
    key = f"transformers/models/{ex.module}/modeling_{ex.module}.py"
    return _source_lines().get("sha256", {}).get(key)


def sha256_of(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def normalize(text: str, out: Path) -> str:
    from cannbot_prefetch import __version__

    reps = [(str(out.resolve()), "<OUT>"), (str(out), "<OUT>"), (str(REPO), "<REPO>")]
    try:
        reps.append((str(site_packages()), "<SITE_PACKAGES>"))
    except ImportError:
        pass
    for old, new in sorted(reps, key=lambda r: -len(r[0])):
        text = text.replace(old, new)
    text = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", text)
    text = re.sub(r"(tool_version[\"']?:\s*[\"']?)" + re.escape(__version__), r"\g<1><version>", text)
    text = text.replace(f"cannbot-prefetch {__version__}", "cannbot-prefetch <version>")
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}| UTC)?",
                  "<timestamp>", text)
    return text


def run(ex: Example, out: Path) -> dict[str, int]:
    """Run analyze + report for one example into `out`; returns the exit codes."""
    root = REPO / "examples" / ex.name
    profile = root / ex.profile
    args, _ = model_src(ex)
    env = dict(os.environ, COLUMNS="120")
    codes = {}
    a = subprocess.run(cannbot_argv() + ["prefetch", "analyze", str(profile), *args,
                                          "--model-config", str(root / "config.json"),
                                          "--out", str(out), "--lang", ex.lang, "--json"],
                       capture_output=True, text=True, env=env)
    codes["analyze"] = a.returncode
    (out / "analyze.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "analyze.json").write_text(a.stdout, encoding="utf-8")
    (out / "analyze.stderr.txt").write_text(a.stderr, encoding="utf-8")
    if a.returncode != 0 or not (out / "prefetch_plan.yaml").exists():
        return codes
    r = subprocess.run(cannbot_argv() + ["prefetch", "report", "--plan", str(out / "prefetch_plan.yaml"),
                                          "--baseline", str(profile), "--out",
                                          str(out / "report" / "report.md"), "--lang", ex.lang, "--json"],
                       capture_output=True, text=True, env=env)
    codes["report"] = r.returncode
    (out / "report").mkdir(parents=True, exist_ok=True)
    (out / "report" / "report.json").write_text(r.stdout, encoding="utf-8")
    (out / "report.stderr.txt").write_text(r.stderr, encoding="utf-8")
    return codes


def produced(ex: Example, out: Path) -> dict[str, str]:
    """The normalized text of each produced file (missing files are absent)."""
    return {f: normalize((out / f).read_text(encoding="utf-8"), out)
            for f in TEXT_FILES if (out / f).exists()}


README = """# Expected outputs ({name}, {profile})

What `cannbot prefetch analyze` and `cannbot prefetch report` (baseline only: the expected-gain
analysis) write for this example's generated profile. Regenerated and compared by
`tests/integration/test_examples_expected.py`; rewrite them after an intended change with

    python tests/integration/expected_outputs.py

Volatile text is normalized: the tool version (`<version>`), absolute paths (`<REPO>`, `<OUT>`,
`<SITE_PACKAGES>`: the installed transformers package whose `modeling_{module}.py` is the model
source), sha256 digests (`<sha256>`) and timestamps. Because of those placeholders this plan is
for reading, not for `apply`; run the commands above to get a usable one.

Commands (exit codes: {codes}):

    cannbot prefetch analyze examples/{name}/{profile} --model-src <SITE_PACKAGES>/transformers/models/{module}/modeling_{module}.py --src-map {recording}=<SITE_PACKAGES> --model-config examples/{name}/config.json --out OUT --lang {lang} --json
    cannbot prefetch report --plan OUT/prefetch_plan.yaml --baseline examples/{name}/{profile} --out OUT/report/report.md --lang {lang} --json
"""


def regenerate(ex: Example) -> dict[str, int]:
    dest = ex.dest
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        codes = run(ex, out)
        for f in (*TEXT_FILES, *BINARY_FILES, "README.md"):
            if (dest / f).exists():
                (dest / f).unlink()
        dest.mkdir(parents=True, exist_ok=True)
        for f, text in produced(ex, out).items():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            (dest / f).write_text(text, encoding="utf-8")
        for f in BINARY_FILES:
            if (out / f).exists():
                (dest / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(out / f, dest / f)
        (dest / "README.md").write_text(README.format(
            name=ex.name, module=ex.module, lang=ex.lang, profile=ex.profile, recording=RECORDING_SITE,
            codes=json.dumps(codes)), encoding="utf-8")
    return codes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    bad = 0
    for ex in EXAMPLES:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "out"
                out.mkdir()
                run(ex, out)
                fresh = produced(ex, out)
            dest = ex.dest
            for f, text in fresh.items():
                if not (dest / f).exists() or (dest / f).read_text(encoding="utf-8") != text:
                    print(f"differs: {(dest / f).relative_to(REPO)}", file=sys.stderr)
                    bad = 1
        else:
            print(f"{ex.label}: {regenerate(ex)}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
