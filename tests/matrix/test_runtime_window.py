"""Issue 30 part 2: the costed window is the window that runs. On GENERATED decode profiles the
matrix does not hold (other decoder files, batches, parts, tp, the MLP in graph order, exports
without call stacks), every planned site's window (plan `evidence.window.raw_us`) matches the
oracle's (runtime_window.py: what the applied tiny model runs between the prefetch and its
target, costed on the profile's timeline) within 10 %.

Before the fix two of these failed as the issue says: without call stacks the LM head was
planned on [RmsNorm] 5.0 µs (the final norm runs inside `self.model(...)`, the call after it;
the runtime window is no op, 1.4 µs), and in graph order the MLP's down_proj on [Mul] 5.0 µs
`exact` (the call goes before the whole statement: gate_proj, Silu, up_proj and Mul run, 200 µs).
"""

from __future__ import annotations

from statistics import mean

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from decodegen import Spec  # noqa: E402
from matrix_run import loaded, run_profile, tiny_model  # noqa: E402
from runtime_window import npu_stand_in, record, span_us, windows  # noqa: E402

TOLERANCE = 0.10          # the issue's "within 10 %"

SPECS = {
    "mistral7b-b1-short-tp1-910B3": Spec("mistral-7b", "910B3", batch=1, context=512),
    "qwen25-7b-b8-long-tp4-910B4": Spec("qwen2.5-7b", "910B4", batch=8, context=8192, tp=4),
    "llama1b-b1-short-tp1-910B3-graph": Spec("llama-3.2-1b", "910B3", batch=1, context=512,
                                             order="graph"),
    "llama8b-b1-short-nostack-graph": Spec("llama-3.1-8b", "910B3", batch=1, context=512,
                                           order="graph", stacks=False),
    "llama8b-b1-short-nostack": Spec("llama-3.1-8b", "910B3", batch=1, context=512,
                                     stacks=False),
    "mistral7b-b1-2k-tp2-910B4-nostack": Spec("mistral-7b", "910B4", batch=1, context=2048,
                                              tp=2, stacks=False),
    "qwen25-7b-b32-short-tp2-910B3": Spec("qwen2.5-7b", "910B3", batch=32, context=1024, tp=2),
}


def _weight(module, expr: str):
    obj = module
    for part in expr.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _runtime(run):
    """Site id -> the runtime windows of its prefetch calls in one decode step."""
    with loaded(run) as module:
        model = tiny_model(run, module)
        weights = {}
        for s in run.sites:
            for _, m in model.named_modules():
                if type(m).__name__ == s["insert"]["class"]:
                    w = _weight(m, s["target"]["weight_expr"])
                    if w is not None:
                        weights[w.untyped_storage().data_ptr()] = s["id"]
        for m in model.modules():
            if "enable_prefetch" in vars(m):
                object.__setattr__(m, "enable_prefetch", True)
        with npu_stand_in(), torch.no_grad():
            pre = model(torch.tensor([[1, 2, 3, 4]]), use_cache=True)
            nxt = torch.tensor([[5]])
            events = record(model, str(run.src),
                            lambda: model(nxt, cache=pre.cache, use_cache=True))
    out: dict[str, list] = {}
    for w in windows(run.gen, events, weights):
        out.setdefault(w.site, []).append(w)
    return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_planned_window_is_the_runtime_window(name, tmp_path):
    run = run_profile(name, tmp_path, SPECS[name]).ok()
    assert run.sites, f"{name}: nothing planned"
    rc, _, out = run.applied()
    assert rc == 0, out[-600:]
    got = _runtime(run)
    for s in run.sites:
        sid, plan_w = s["id"], s["evidence"]["window"]
        assert got.get(sid), f"{sid}: no prefetch of its weight ran before the target"
        rt = mean(span_us(run.gen, w) for w in got[sid])
        ops = [run.gen.ops[i].type for i in got[sid][0].ops]
        assert abs(plan_w["raw_us"] - rt) <= TOLERANCE * rt, (
            f"{sid}: plan {plan_w['ops']} {plan_w['raw_us']} µs, runtime {ops} {rt:.2f} µs")


def test_the_two_cases_of_the_issue_are_no_longer_planned(tmp_path):
    """The oracle's verdict on the two sites the issue found: their real windows are too short
    (the LM head: no op) or hold memory-bound MatMuls (down_proj), so neither is planned."""
    graph = run_profile("g", tmp_path / "g", SPECS["llama8b-b1-short-nostack-graph"]).ok()
    bare = run_profile("b", tmp_path / "b", SPECS["llama8b-b1-short-nostack"]).ok()
    assert "llamamlp-down_proj" not in {s["id"] for s in graph.sites}
    assert "llamaforcausallm-lm_head" not in {s["id"] for s in bare.sites}
    down = next(r for r in graph.doc["rejections"] if "LlamaMLP.down_proj" in r["reason"])
    assert down["reason_code"] == "no_safe_window", down
    head = next(r for r in bare.doc["rejections"] if "LlamaForCausalLM.lm_head" in r["reason"])
    assert head["reason_code"] == "window_too_short", head
