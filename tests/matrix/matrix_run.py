"""The tool run on a matrix profile, as a user would: generate the profile, copy the real
transformers modeling file into tmp, `analyze --model-src COPY --model-config config.json --tp N
--max-sites 10 --json`, then on demand `apply --write`, load the rewritten copy and build a tiny
random-weight model of the same family, and `report` in both modes. Each step runs once per
profile per session (the runs are cached), so every test reads the same outcome."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import re
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from decodegen import MATRIX, Generated, Placement, generate

MAX_SITES = 10          # plan every target the engine finds safe, not only the first
runner = CliRunner()


def _cli(*args: str) -> tuple[int, Any, str]:
    res = runner.invoke(app, ["prefetch", *args])
    try:
        doc = json.loads(res.stdout)
    except ValueError:
        doc = None
    return res.exit_code, doc, res.output


@dataclass
class Run:
    name: str
    gen: Generated
    src: Path                       # the copied modeling file the plan targets
    out: Path
    rc: int
    doc: dict[str, Any] | None      # analyze --json
    output: str
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        if self.rc == 0 and self.doc is not None and "error" not in self.doc:
            return None
        if self.doc and "error" in self.doc:
            return f"analyze exit {self.rc}: {self.doc['error'].get('message')}"
        return f"analyze exit {self.rc}: {self.output[-600:]}"

    def ok(self) -> "Run":
        assert self.error is None, self.error
        return self

    @property
    def plan_path(self) -> Path:
        return self.out / "prefetch_plan.yaml"

    @property
    def plan(self) -> dict[str, Any]:
        if "plan" not in self._cache:
            self._cache["plan"] = yaml.safe_load(self.ok().plan_path.read_text(encoding="utf-8"))
        return self._cache["plan"]

    @property
    def sites(self) -> list[dict[str, Any]]:
        return list(self.plan.get("sites") or [])

    @property
    def design(self) -> str:
        return (self.ok().out / "prefetch_design.md").read_text(encoding="utf-8")

    @staticmethod
    def target(site: dict[str, Any]) -> str:
        return f"{site['target']['class']}.{site['target']['attr']}"

    @staticmethod
    def placement(site: dict[str, Any]) -> Placement:
        ins = site["insert"]
        assert ins["method"] == "forward", f"{site['id']}: insertion in {ins['method']}"
        return Placement(ins["class"], ins["anchor_call"], ins["position"], Run.target(site),
                         site["target"].get("scope") or "same")

    # -- apply, load
    def applied(self) -> tuple[int, Any, str]:
        if "apply" not in self._cache:
            self._cache["apply"] = _cli("apply", str(self.plan_path), "--write", "--yes", "--json",
                                        "--root", str(self.src.parent.parent))
        return self._cache["apply"]

    def module(self):
        """The rewritten modeling file, executed once as a module of the transformers package."""
        if "module" not in self._cache:
            rc, _, out = self.applied()
            assert rc == 0, f"apply exit {rc}: {out[-600:]}"
            self._cache["module"] = _exec_copy(self.gen.spec.model_type, self.src)
        return self._cache["module"]

    # -- report
    def report(self, ab: bool) -> tuple[int, Any, str]:
        key = f"report-{ab}"
        if key not in self._cache:
            out = self.out / ("report-ab" if ab else "report-base") / "report.md"
            args = ["report", "--plan", str(self.plan_path), "--baseline", str(self.gen.profile)]
            if ab:
                args += ["--optimized", str(self.gen.profile)]
            self._cache[key] = _cli(*args, "--out", str(out), "--json")
        return self._cache[key]


def _exec_copy(family: str, path: Path):
    pkg = f"transformers.models.{family}"
    importlib.import_module(pkg)
    helper_spec = importlib.util.spec_from_file_location(f"{pkg}._cannbot_prefetch",
                                                         path.parent / "_cannbot_prefetch.py")
    helper = importlib.util.module_from_spec(helper_spec)
    helper_spec.loader.exec_module(helper)
    name = f"{pkg}.modeling_{family}"
    with registered({f"{pkg}._cannbot_prefetch": helper}):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        with registered({name: module}):
            spec.loader.exec_module(module)
    return module, helper


@contextlib.contextmanager
def registered(mods: dict[str, Any]):
    """Put modules in sys.modules for the block (verify finds the helper through them)."""
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@contextlib.contextmanager
def loaded(run: Run):
    module, helper = run.module()
    pkg = f"transformers.models.{run.gen.spec.model_type}"
    with registered({f"{pkg}._cannbot_prefetch": helper, module.__name__: module}):
        yield module


def tiny_model(run: Run, module):
    """A 2-layer random-weight model of the profiled family (same structure, tiny sizes)."""
    import torch
    import transformers

    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=8,
                  attn_implementation="eager")
    family = run.gen.spec.model_type
    if family == "llama":
        cfg, cls = transformers.LlamaConfig(**common), "LlamaForCausalLM"
    elif family == "qwen3_moe":
        cfg = transformers.Qwen3MoeConfig(**common, num_experts=8, num_experts_per_tok=2,
                                          moe_intermediate_size=32, decoder_sparse_step=1)
        cls = "Qwen3MoeForCausalLM"
        cfg._experts_implementation = "batched_mm"   # traceable experts for the graph check
    elif family == "mistral":
        cfg, cls = transformers.MistralConfig(**common), "MistralForCausalLM"
    elif family == "qwen2":
        cfg, cls = transformers.Qwen2Config(**common), "Qwen2ForCausalLM"
    else:
        raise AssertionError(f"no tiny model for {family}")
    torch.manual_seed(0)
    return getattr(module, cls)(cfg).eval()


def run_profile(name: str, root: Path, spec=None) -> Run:
    """`name` of MATRIX, or any name with its `spec` (issue 30's profiles the matrix lacks)."""
    spec = spec or MATRIX[name]
    here = root / name
    if here.exists():
        shutil.rmtree(here)
    src = _copy_modeling(spec.model_type, here / "src")
    gen = generate(replace(spec, model_src=str(src)), here / "profile")
    out = here / "out"
    rc, doc, output = _cli("analyze", str(gen.profile), "--model-src", str(src), "--model-config",
                           str(gen.config_path), "--tp", str(spec.tp), "--max-sites", str(MAX_SITES),
                           "--out", str(out), "--json")
    return Run(name, gen, src, out, rc, doc, output)


def _copy_modeling(family: str, dest: Path) -> Path:
    import transformers

    src = Path(transformers.__file__).parent / "models" / family / f"modeling_{family}.py"
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, dest / src.name))


# -- the same figure, read from each output

def design_gains(design: str) -> dict[str, tuple[float, float, float]]:
    """`- <site id>: low / mid / high µs per step` lines of the design's expected-saving section."""
    out = {}
    num = r"([\d.,]+)"    # fmt.number: thousands separated
    for m in re.finditer(rf"^- ([a-z0-9_.-]+): {num} / {num} / {num} µs per step", design, re.M):
        out[m.group(1)] = tuple(float(m.group(i).replace(",", "")) for i in (2, 3, 4))
    return out


def report_gains(doc: dict[str, Any]) -> dict[str, tuple[float, float, float]] | None:
    """Per site, the expected per-step saving a report states (None when it states none)."""
    exp = doc.get("expected")
    if not exp:
        return None
    return {s["site_id"]: tuple(s["saving_per_step_us"]) for s in exp.get("sites") or []}
