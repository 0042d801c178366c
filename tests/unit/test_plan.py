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
     "sites[0].guard.max_len' must be an integer >= 1"),
    (lambda d: d["sites"][0].update(guard={"expr": "x[0]", "dim": -2, "max_len": 8}),
     "sites[0].guard.expr' must be a local name or dotted attribute path"),
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
