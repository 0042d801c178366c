"""Call paths and shapes issue 37 found wrong on real transformers files (copied to tmp at test
time): a decoder stack iterated through `zip(self.config.layer_types, self.layers, strict=True)`
(ergo) is a call path; a value built by `.view(batch_size * seq_length, emb_dim)` (zaya) has
batch and sequence merged, so the decode guard never reads its dim 1 (the hidden size) as the
query length. Configs are the families' own defaults (transformers' config classes)."""

from __future__ import annotations

import json

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.mapping import Mapper
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

transformers = pytest.importorskip("transformers")


def _config(tmp_path, cfg) -> str:
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json_string(use_diff=False))
    return str(path)


@pytest.mark.parametrize("linear", ["ErgoAttention.o_proj", "ErgoAttention.qkv_proj",
                                    "ErgoMLP.down_proj", "ErgoSharedExpert.down_proj"])
def test_zip_over_the_layer_list_is_a_call_path(modeling, tmp_path, linear):
    src = modeling("ergo")
    data = json.loads(transformers.ErgoConfig().to_json_string(use_diff=False))
    m = Mapper(load_model_source(src, data, "config.json"), policy=POLICY)
    runs = {f"{e.owner}.{e.attr}" for e in m.events_of("ErgoForCausalLM") if e.kind == "linear"}
    assert linear in runs


def test_a_view_merging_batch_and_sequence_is_not_guarded_on_dim_1(modeling, tmp_path):
    src = modeling("zaya")
    cfg = transformers.ZayaConfig()
    res = api.analyze(None, model_src=str(src), model_config=_config(tmp_path, cfg),
                      targets=("ZayaExperts.gate_up_proj",), window="hidden_states_flat",
                      out=str(tmp_path / "out"))
    res.save()
    site = load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites[0]
    # named: manual mode's default window now starts at the router's output (issue 32)
    assert site.dependency == "hidden_states_flat"        # built by .view(b * s, emb_dim)
    assert site.guard is None or site.guard.expr != "hidden_states_flat", site.guard


def _text(cfg):
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


@pytest.mark.parametrize("family, config_cls, target, dims", [
    # `KosmosTextAttention(config, embed_dim=config.embed_dim, ...)`: a keyword the caller passes
    ("kosmos2", "Kosmos2Config", "KosmosTextAttention.out_proj",
     lambda t: [t.embed_dim, t.embed_dim]),
    # ffn_dim lives in the text sub-config of a composite config.json
    ("kosmos2_5", "Kosmos2_5Config", "Kosmos2_5TextFFN.fc2", lambda t: [t.embed_dim, t.ffn_dim]),
    ("blenderbot_small", "BlenderbotSmallConfig", "BlenderbotSmallAttention.out_proj",
     lambda t: [t.d_model, t.d_model]),
    ("blenderbot_small", "BlenderbotSmallConfig", "BlenderbotSmallDecoderLayer.fc2",
     lambda t: [t.d_model, t.decoder_ffn_dim]),
])
def test_shapes_through_the_constructor_call(modeling, tmp_path, family, config_cls, target, dims):
    """The weight dims ([out, in]) from the family's default config class, not from the tool."""
    cfg = getattr(transformers, config_cls)()
    res = api.analyze(None, model_src=str(modeling(family)), model_config=_config(tmp_path, cfg),
                      targets=(target,), out=str(tmp_path / "out"))
    res.save()
    site = load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites[0]
    assert list(site.basis.dims) == dims(_text(cfg))


def test_a_module_set_to_none_then_built_under_if_may_run(modeling):
    """granitemoehybrid: `self.mamba = None`, then `self.mamba = GraniteMoeHybridMambaLayer(...)`
    under `if config.layers_block_type[layer_idx] == ...`, and `forward` runs it under
    `if self.mamba is not None:`. The first value is not the one every layer keeps."""
    cfg = transformers.GraniteMoeHybridConfig(layer_types=["mamba", "attention"],
                                              num_hidden_layers=2)
    data = json.loads(cfg.to_json_string(use_diff=False))
    m = Mapper(load_model_source(modeling("granitemoehybrid"), data, "config.json"), policy=POLICY)
    runs = {f"{e.owner}.{e.attr}" for e in m.events_of("GraniteMoeHybridForCausalLM")
            if e.kind == "linear"}
    assert {"GraniteMoeHybridMambaLayer.in_proj", "GraniteMoeHybridMambaLayer.out_proj"} <= runs


def test_a_sub_config_handed_down_two_constructors(modeling, tmp_path):
    """blt: `BltLocalEncoder(config.encoder_config)` builds `BltTransformerLayer(config, i)`,
    which builds `BltMLP(config)`: `config` there is the encoder's sub-config, two calls down
    (analyze said "config key 'hidden_size' is missing", true of the top level only)."""
    cfg = transformers.BltConfig()
    res = api.analyze(None, model_src=str(modeling("blt")), model_config=_config(tmp_path, cfg),
                      targets=("BltMLP.down_proj",), out=str(tmp_path / "out"))
    res.save()
    dims = list(load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites[0].basis.dims)
    subs = [cfg.encoder_config, cfg.decoder_config, cfg.global_config]
    assert dims in [[c.hidden_size, c.intermediate_size] for c in subs]
