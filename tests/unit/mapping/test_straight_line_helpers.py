"""Helpers whose body is straight-line code (vLLM 0.34's qwen3_dflash.py sizes its `fc` with
`_get_dflash_fc_input_size(vllm_config)`: locals, an `assert`, a conditional, a return). The model
file below is GENERATED for this test in vLLM's style (written for this project, not copied);
each expected dim is worked out by hand in the comment beside it. The evaluator runs no code
from the file: a loop, an undecided `if` or a key the config lacks is refused by name."""

from __future__ import annotations

import pytest

from cannbot_prefetch.mapping.evaluate.bounds import MAX_HELPER_STATEMENTS
from cannbot_prefetch.mapping.source import load_model_source

MODEL = '''
# GENERATED for tests/unit/mapping/test_straight_line_helpers.py in vLLM 0.34's style
import torch
from torch import nn

from vllm.config import VllmConfig
from vllm.distributed import get_draft_width
from vllm.model_executor.layers.linear import ReplicatedLinear


def _fc_input_size(vllm_config: VllmConfig) -> int:
    """How many hidden states the draft concatenates, times their width."""
    config = vllm_config.model_config.hf_config
    assert config is not None
    unused = config.key_nobody_reads
    layers = getattr(config, "aux_layer_ids", None)
    if layers:
        count = len(layers)
    elif config.num_hidden_layers > 4:
        count = 4
    else:
        count = config.num_hidden_layers
    width = getattr(config, "target_hidden_size", None) or config.hidden_size
    if count == 1:
        return width
    return width * count


def _needs_a_key(vllm_config: VllmConfig) -> int:
    config = vllm_config.model_config.hf_config
    width = config.draft_width
    return width * 2


def _from_library(vllm_config: VllmConfig) -> int:
    width = get_draft_width(vllm_config)
    return width * 2


def _loops(vllm_config: VllmConfig) -> int:
    total = 0
    for i in range(3):
        total = total + i
    return total


def _undecided(vllm_config: VllmConfig, scale) -> int:
    if scale:
        return 1
    return 2


def _falls_off(vllm_config: VllmConfig) -> int:
    config = vllm_config.model_config.hf_config
    if config.hidden_size > 10 ** 9:
        return 1


def _too_long(vllm_config: VllmConfig) -> int:
    config = vllm_config.model_config.hf_config
{filler}    return config.hidden_size


class DraftModel(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.fc = ReplicatedLinear(input_size=_fc_input_size(vllm_config),
                                   output_size=config.hidden_size, bias=False)
        self.keyed = ReplicatedLinear(input_size=_needs_a_key(vllm_config),
                                      output_size=config.hidden_size, bias=False)
        self.library = ReplicatedLinear(input_size=_from_library(vllm_config),
                                        output_size=config.hidden_size, bias=False)
        self.looped = ReplicatedLinear(input_size=_loops(vllm_config),
                                       output_size=config.hidden_size, bias=False)
        self.undecided = ReplicatedLinear(input_size=_undecided(vllm_config, config),
                                          output_size=config.hidden_size, bias=False)
        self.fell = ReplicatedLinear(input_size=_falls_off(vllm_config),
                                     output_size=config.hidden_size, bias=False)
        self.long = ReplicatedLinear(input_size=_too_long(vllm_config),
                                     output_size=config.hidden_size, bias=False)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        h = self.fc(hidden_states)
        return self.keyed(h) + self.library(h) + self.looped(h) + self.undecided(h) + self.fell(h) + self.long(h)
'''
FILLER = "    x = 1\n" * MAX_HELPER_STATEMENTS       # one over the bound with the assignment above

CFG = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100}


def _lin(tmp_path, **over):
    f = tmp_path / "draft_vllm.py"
    f.write_text(MODEL.replace("{filler}", FILLER))
    ms = load_model_source(f, {**CFG, **over}, "config.json")
    return {a: lin for (c, a), lin in ms.linears.items() if c == "DraftModel"}


@pytest.mark.parametrize("over, in_dim", [
    ({}, 64 * 2),                                   # no aux ids, 2 layers: 64 x 2
    ({"num_hidden_layers": 6}, 64 * 4),             # elif: more than 4 layers -> 4
    ({"num_hidden_layers": 1}, 64),                 # count 1: the early return, 64
    ({"aux_layer_ids": [1, 5, 9]}, 64 * 3),         # three aux layers
    ({"target_hidden_size": 48}, 48 * 2),           # the target's width wins over ours
])
def test_a_straight_line_helper_follows_the_config(tmp_path, over, in_dim):
    fc = _lin(tmp_path, **over)["fc"]
    assert fc.dims == (64, in_dim), fc.error      # ReplicatedLinear: (output, input)


def test_a_key_the_config_lacks_is_named(tmp_path):
    lin = _lin(tmp_path)["keyed"]
    assert lin.dims is None and "draft_width" in lin.error
    assert _lin(tmp_path, draft_width=24)["keyed"].dims == (64, 48)     # 24 x 2


def test_a_library_function_is_named_with_its_module(tmp_path):
    lin = _lin(tmp_path)["library"]
    assert lin.dims is None and "_from_library: width: get_draft_width() from " \
        "vllm.distributed, whose code is not read" in lin.error


def test_what_is_not_straight_line_or_not_decided_is_refused_by_name(tmp_path):
    lin = _lin(tmp_path)
    assert lin["looped"].dims is None and "_loops: a `for` statement" in lin["looped"].error
    assert lin["undecided"].dims is None and \
        "_undecided: `if scale` is not decided by the config" in lin["undecided"].error
    assert lin["fell"].dims is None and "_falls_off: no `return` runs" in lin["fell"].error
    assert lin["long"].dims is None and \
        f"_too_long: more than {MAX_HELPER_STATEMENTS} statements" in lin["long"].error
