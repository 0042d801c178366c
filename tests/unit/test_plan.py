"""The plan contract: round trip and validation errors that name the key path."""

from __future__ import annotations

import pytest
import yaml

from cannbot_prefetch.errors import PlanError
from cannbot_prefetch.plan import (Basis, Cap, Guard, Insert, Join, Plan, Saving, Site, Target, dump_plan,
                                   load_plan, plan_from_dict, plan_to_dict, save_plan)


def _site(**kw) -> Site:
    base = dict(
        id="llama-mlp-gate_proj",
        target=Target("modeling_llama.py", "LlamaMLP", "gate_proj", "self.mlp.gate_proj.weight"),
        insert=Insert("LlamaDecoderLayer", "forward", "self.mlp", "before"),
        dependency="hidden_states",
        join=Join("LlamaDecoderLayer", "forward", "end"),
        max_size=16 * 2**20,
        basis=Basis((8192, 2048), 2.0, 0.5, (Cap("weight", 33554432, "8192x2048 bf16"),),
                    "coefficient", "I*H*b*c"),
        ladder={"up": [0.7, 1.0], "down": [0.3, 0.1]},
        mapping="stack",
        evidence={"mean_us": 27.1},
        saving_us=Saving(3.0, 5.0, 6.0),
        source_sha256="0" * 64,
        max_tokens=64,
    )
    base.update(kw)
    return Site(**base)


def test_round_trip_through_yaml(tmp_path):
    plan = Plan(sites=(_site(),), created_from={"hardware": "910B3"})
    path = tmp_path / "prefetch_plan.yaml"
    save_plan(plan, path)
    assert load_plan(path) == plan
    assert "status: proposed" in path.read_text()


def test_guard_round_trips_and_is_optional(tmp_path):
    """The decode guard names the tensor and the query-length dim the runtime reads."""
    guarded = _site(guard=Guard("query_states", -2, 64))
    plan = Plan(sites=(guarded, _site(id="no-guard")))
    data = yaml.safe_load(dump_plan(plan))
    assert data["sites"][0]["guard"] == {"expr": "query_states", "dim": -2, "max_len": 64}
    assert "guard" not in data["sites"][1]          # absent = no decode guard
    back = plan_from_dict(data)
    assert back == plan and back.sites[0].guard == Guard("query_states", -2, 64)
    data["sites"][1]["guard"] = None
    assert plan_from_dict(data).sites[1].guard is None


@pytest.mark.parametrize("mode, call, form", [
    ("eager", None, "direct"), ("ge_graph", None, "direct"), ("npugraph_ex", None, "side_stream"),
    ("eager", "side_stream", "side_stream"), ("npugraph_ex", "direct", "direct")])
def test_call_form_defaults_by_mode_and_round_trips(mode, call, form):
    """Issue 30: the mode's recommended call form (cann-recipes-infer's prefetch principles),
    or the plan's `call`; absent stays absent."""
    plan = Plan(sites=(_site(),), mode=mode, call=call)
    data = yaml.safe_load(dump_plan(plan))
    assert data.get("call") == call
    back = plan_from_dict(data)
    assert back == plan and back.call_form == form


@pytest.mark.parametrize("mode, call, message", [
    ("eager", "stream", "'call' must be one of direct, side_stream"),
    ("ge_graph", "side_stream", "not a ge_graph form")])
def test_bad_call_form_is_refused(mode, call, message):
    data = yaml.safe_load(dump_plan(Plan(sites=(_site(),), mode=mode)))
    data["call"] = call
    with pytest.raises(PlanError, match=message):
        plan_from_dict(data)


def test_applied_status_round_trips(tmp_path):
    plan = Plan(sites=(_site(),)).with_status("applied")
    assert plan_from_dict(yaml.safe_load(dump_plan(plan))).status == "applied"


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["sites"][0].update(max_size=0), "sites[0].max_size' must be a positive integer"),
    (lambda d: d["sites"][0].update(max_size=1.5), "sites[0].max_size' must be an integer"),
    (lambda d: d["sites"][0]["insert"].update(position="around"), "sites[0].insert.position"),
    (lambda d: d["sites"][0].pop("dependency"), "missing key 'sites[0].dependency'"),
    (lambda d: d.update(mode="turbo"), "'mode' must be one of eager, ge_graph, npugraph_ex"),
    (lambda d: d.update(status="done"), "'status' must be one of"),
    (lambda d: d["sites"].append(dict(d["sites"][0])), "duplicate site id"),
    (lambda d: d["sites"][0]["basis"].update(dims=[8192, -1]), "basis.dims"),
    (lambda d: d.update(version=9), "plan version 9"),
    (lambda d: d["sites"][0].update(guard={"expr": "x", "dim": -2, "max_len": 0}),
     "sites[0].guard.max_len' must be an integer in 1.."),
    (lambda d: d["sites"][0].update(guard={"expr": "x[0]", "dim": -2, "max_len": 8}),
     "sites[0].guard.expr' must be a local name or an attribute path"),
    (lambda d: d["sites"][0].update(guard={"expr": "x", "dim": "S", "max_len": 8}),
     "sites[0].guard.dim' must be an integer"),
    (lambda d: d["sites"][0].update(guard={"dim": -2, "max_len": 8}),
     "missing key 'sites[0].guard.expr'"),
])
def test_invalid_plans_name_the_key(tmp_path, mutate, message):
    data = plan_to_dict(Plan(sites=(_site(),)))
    mutate(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert message in str(exc.value)
    assert str(path) in str(exc.value)


def test_not_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sites: [\n")
    with pytest.raises(PlanError, match="not valid YAML"):
        load_plan(bad)
    with pytest.raises(PlanError, match="not found"):
        load_plan(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- D12: every field typed, ranged

@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["sites"][0].update(ladder={"up": 5}), "'sites[0].ladder.up' must be a list"),
    (lambda d: d["sites"][0].update(ladder={"up": [0.7, 3]}), "ladder.up[1]' must be a coefficient"),
    (lambda d: d["sites"][0].update(ladder={"sideways": [0.5]}), "unknown key 'sites[0].ladder.sideways'"),
    (lambda d: d.update(rejections=[1]), "'rejections[0]' must be a mapping"),
    (lambda d: d["sites"][0]["evidence"].update(window="x"), "'sites[0].evidence.window' must be a mapping"),
    (lambda d: d["sites"][0]["evidence"].update(signature=[1]), "evidence.signature' must be a mapping"),
    (lambda d: d["sites"][0]["evidence"].update(notes="n"), "evidence.notes' must be a list"),
    (lambda d: d["sites"][0].update(max_tokens=-1), "'sites[0].max_tokens' must be an integer in 1.."),
    (lambda d: d["sites"][0].update(max_tokens=2**40), "'sites[0].max_tokens' must be an integer in 1.."),
    (lambda d: d["sites"][0].update(max_size=10**100), "'sites[0].max_size' must be a positive integer"),
    (lambda d: d["sites"][0].update(max_size=33554432 + 1), "more than the weight it prefetches"),
    (lambda d: d["sites"][0].update(surprise=1), "unknown key 'sites[0].surprise'"),
    (lambda d: d.update(extra_top=1), "unknown key 'extra_top'"),
    (lambda d: d["switch"].update(colour="red"), "unknown key 'switch.colour'"),
    (lambda d: d["sites"][0]["target"].update(klass="X"), "unknown key 'sites[0].target.klass'"),
    (lambda d: d["sites"][0]["basis"].update(coefficient=float("nan")), "basis.coefficient' must be a finite"),
    (lambda d: d["sites"][0]["basis"].update(coefficient=2.0), "basis.coefficient' must be in (0, 1]"),
    (lambda d: d["sites"][0]["basis"].update(dims=[]), "basis.dims' must be 1 to 8"),
    (lambda d: d["sites"][0]["basis"]["caps"][0].update(bytes=-5), "caps[0].bytes' must be an integer"),
    (lambda d: d["sites"][0]["saving_us"].update(mid="fast"), "saving_us.mid' must be a number"),
    (lambda d: d["sites"][0].update(source_sha256=""), "'sites[0].source_sha256' must be the 64 hex"),
    (lambda d: d["sites"][0].update(source_sha256="0" * 63 + "g"), "source_sha256' must be the 64 hex"),
    (lambda d: d["sites"][0].pop("source_sha256"), "missing key 'sites[0].source_sha256'"),
    (lambda d: d["created_from"].update(profile=["x"]), "'created_from.profile' must be a string"),
    (lambda d: d["switch"].update(default="yes"), "'switch.default' must be true/false"),
])
def test_d12_every_field_checked_with_its_key_path(tmp_path, mutate, message):
    data = plan_to_dict(Plan(sites=(_site(),), created_from={"hardware": "910B3"}))
    mutate(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert message in str(exc.value) and str(path) in str(exc.value)


# the fields that reach source: each must match its grammar (contract/grammar.py)
@pytest.mark.parametrize("where, key, value", [
    ("site", "id", "x\n        import os"),
    ("site", "id", "Upper"),
    ("site", "id", "join"),
    ("target", "weight_expr", "(__import__('os').system('touch m'), self.down_proj.weight)[1]"),
    ("target", "weight_expr", "self.w  # c"),
    ("target", "weight_expr", "weight"),
    ("target", "class", "A(B)"),
    ("target", "attr", "x[i]"),            # module-list indices are integers (x[0])
    ("target", "weight_expr", "self.layers[i].w"),
    ("target", "weight_expr", "self.m[0](x).w"),
    ("insert", "class", "class"),
    ("insert", "method", "forward()"),
    ("insert", "anchor_call", "self.mlp; import os"),
    ("insert", "anchor_call", "self.m[0:1]"),
    ("dependency", "expr", "x  # hi"),
    ("dependency", "expr", "x\n+ y"),
    ("dependency", "expr", "f(x)"),
    ("join", "where", "after:self.x\nimport os"),
    ("join", "where", "sideways:self.x"),
    ("switch", "name", ""),
    ("switch", "name", "x = __import__('os')"),
    ("switch", "config_path", 'a"); __import__("os").system("touch m"); ("'),
    ("switch", "config_path", 'a"""\nimport os\n"""'),
])
def test_s2_fields_that_reach_source_follow_the_grammar(tmp_path, where, key, value):
    data = plan_to_dict(Plan(sites=(_site(),)))
    node = {"site": data["sites"][0], "switch": data["switch"]}.get(where) or data["sites"][0][where]
    node[key] = value
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert f"{key}' must be" in str(exc.value)


def test_yaml_alias_bomb_and_deep_nesting_are_plan_errors(tmp_path):
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        bomb.append(f"{chr(97 + k)}: &{chr(97 + k)} [" + ", ".join([f"*{chr(96 + k)}"] * 10) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(bomb) + "\n")
    with pytest.raises(PlanError, match="more than"):
        load_plan(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlanError):
        load_plan(path)


def test_save_refuses_a_plan_load_would_refuse(tmp_path):
    with pytest.raises(PlanError, match="weight_expr"):
        save_plan(Plan(sites=(_site(target=Target("m.py", "C", "a", "self.a.weight; x")),)),
                  tmp_path / "p.yaml")
    assert not (tmp_path / "p.yaml").exists()


def test_new_plan_file_gets_the_umask_mode_and_a_rewrite_keeps_its_mode(tmp_path):
    """D13: a new output is 0666 & ~umask, not mkstemp's 0600; a 0644 plan stays 0644."""
    import os

    path = tmp_path / "p.yaml"
    old = os.umask(0o022)
    try:
        save_plan(Plan(sites=(_site(),)), path)
        assert path.stat().st_mode & 0o777 == 0o644
        path.chmod(0o640)
        save_plan(Plan(sites=(_site(),)).with_status("applied"), path)
        assert path.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
    assert not [p for p in tmp_path.iterdir() if p.name != "p.yaml"]
