"""VllmConfig as a model file reads it: `vllm_config.model_config.hf_config`, cache and quant."""
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelConfig:
    hf_config: Any = None

    max_model_len: int = 256

    @property
    def hf_text_config(self):
        return self.hf_config

    @property
    def use_mla(self) -> bool:
        """Multi-head latent attention: the config has a KV LoRA rank (vLLM's
        `is_deepseek_mla`, with `VLLM_MLA_DISABLE` unset)."""
        return getattr(self.hf_text_config, "kv_lora_rank", None) is not None


@dataclass
class CacheConfig:
    block_size: int = 16


@dataclass
class EPLBConfig:
    """Expert-parallel load balancing: off (no redundant experts) at one rank."""
    num_redundant_experts: int = 0


@dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    enable_expert_parallel: bool = False
    enable_eplb: bool = False
    use_sequence_parallel_moe: bool = False
    decode_context_parallel_size: int = 1
    dcp_q_replicate: bool = False
    eplb_config: EPLBConfig = field(default_factory=EPLBConfig)


@dataclass
class VllmConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    quant_config: Any = None
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)


_CURRENT = VllmConfig()


def get_current_vllm_config() -> VllmConfig:
    return _CURRENT


@dataclass
class SchedulerConfig:
    """The scheduler's limits as a model file reads them (plamo3 keeps it; vLLM's defaults for
    one sequence group: batched tokens, sequences)."""
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    max_model_len: int = 256


# read as `vllm_config.scheduler_config`: one shared default (the dataclass above is fixed)
VllmConfig.scheduler_config = SchedulerConfig()


@dataclass
class SpeculativeConfig:
    """A speculative draft's settings as a draft model file reads them: the draft's own model
    config (`draft_model_config.hf_config`) and how many tokens it proposes per step."""
    draft_model_config: Any = None
    num_speculative_tokens: int = 1
    method: str = "draft_model"


# not a speculative run unless a factory building a draft sets one (vLLM's default)
VllmConfig.speculative_config = None


def _total_layers(self) -> int:
    """The target model's layer count (a draft numbers its layers after them)."""
    return self.hf_text_config.num_hidden_layers


def _vocab(self) -> int:
    return self.hf_text_config.vocab_size


ModelConfig.get_total_num_hidden_layers = _total_layers
ModelConfig.get_vocab_size = _vocab
# the dtype a model file allocates its own tensors in: the shim's layers compute in float32
ModelConfig.dtype = __import__("torch").float32


def _set_current(config):
    """`set_current_vllm_config(cfg)`: while the block runs, `get_current_vllm_config()` is
    `cfg` (vLLM's loader builds a model inside it; drafts build their layers from it)."""
    import contextlib

    @contextlib.contextmanager
    def block():
        global _CURRENT
        old, _CURRENT = _CURRENT, config
        try:
            yield
        finally:
            _CURRENT = old
    return block()


def set_current_vllm_config(vllm_config, check_compile=False, prefix=None):
    return _set_current(vllm_config)
