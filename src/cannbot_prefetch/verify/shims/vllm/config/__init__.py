"""VllmConfig as a model file reads it: `vllm_config.model_config.hf_config`, cache and quant."""
import contextvars
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelConfig:
    hf_config: Any = None

    max_model_len: int = 256

    def __post_init__(self):
        """vLLM's config loading standardizes the RoPE keys before a model file reads them."""
        if self.hf_config is not None:
            from vllm.transformers_utils.config import patch_rope_parameters
            patch_rope_parameters(self.hf_config)

    @property
    def hf_text_config(self):
        return self.hf_config

    @property
    def dtype(self):
        """The dtype the model is built in: the shim's layers keep float32 parameters."""
        import torch

        return torch.float32

    @property
    def use_mla(self) -> bool:
        """Multi-head latent attention: the config has a KV LoRA rank (vLLM's
        `is_deepseek_mla`, with `VLLM_MLA_DISABLE` unset)."""
        return getattr(self.hf_text_config, "kv_lora_rank", None) is not None


@dataclass
class CacheConfig:
    block_size: int = 16
    cache_dtype: str = "auto"          # vLLM's defaults (config/cache.py): the model's dtype,
    sliding_window: int | None = None  # no window forced over the model's own
    kv_sharing_fast_prefill: bool = False


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
    # platform plugins' own options (vllm-ascend's `--additional-config '{...}'`): a plain dict
    additional_config: dict = field(default_factory=dict)
    lora_config: Any = None


# the config a model is being built under (vLLM: `set_current_vllm_config`); a context
# variable, so a block sets it for its own thread only
_CURRENT = contextvars.ContextVar("vllm_config", default=VllmConfig())


def get_current_vllm_config() -> VllmConfig:
    return _CURRENT.get()


@dataclass
class SchedulerConfig:
    """The scheduler's step budget; the values are vLLM 0.34's defaults
    (config/scheduler.py: DEFAULT_MAX_NUM_BATCHED_TOKENS 2048, DEFAULT_MAX_NUM_SEQS 128)."""
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 128
    max_model_len: int = 256         # plamo3 reads it


@dataclass
class CompilationConfig:
    """Where vLLM's stateful layers register by prefix (`static_forward_context`); the ops the
    compiled graph splits at (`splitting_ops`: None, vLLM's default before its config resolves
    them, and nothing is compiled on the shim)."""
    static_forward_context: dict = field(default_factory=dict)
    splitting_ops: list | None = None


def _per_instance(name: str, make):
    """A VllmConfig attribute made on first read, one per config (vLLM's dataclass has these
    fields; added after the class so the existing field list stays as it was)."""
    def get(self):
        got = self.__dict__.get(name)
        if got is None:
            got = self.__dict__[name] = make()
        return got

    def put(self, value):
        self.__dict__[name] = value
    return property(get, put)


# hybrid families' model files read these (jamba, nemotron_h: scheduler_config; zaya:
# compilation_config.static_forward_context); no speculative decoding on the shim (vLLM: None)
VllmConfig.scheduler_config = _per_instance("scheduler_config", SchedulerConfig)
VllmConfig.compilation_config = _per_instance("compilation_config", CompilationConfig)
VllmConfig.speculative_config = None
VllmConfig.num_speculative_tokens = 0   # no speculative decoding (zaya, ShortConv read it)


def str_dtype_to_torch_dtype(name):
    """A dtype named by a string ("bfloat16", "float16", "float32", ...) as torch's; None stays
    None (vLLM's config/model.py helper)."""
    import torch
    if name is None or isinstance(name, torch.dtype):
        return name
    return getattr(torch, str(name).replace("torch.", ""))


@dataclass
class MultiModalConfig:
    """vLLM's multimodal settings at their defaults (a tower on one rank, no encoder data
    parallelism); read by vision helpers while a multimodal model builds."""
    language_model_only: bool = True        # the text-only run verify makes
    mm_encoder_only: bool = False
    mm_encoder_tp_mode: str = "weights"
    mm_encoder_attn_backend: Any = None
    mm_encoder_attn_dtype: Any = None
    mm_processor_kwargs: Any = None
    limit_per_prompt: dict = field(default_factory=dict)

    def get_limit_per_prompt(self, modality: str) -> int:
        """Text only: no item of any modality per prompt (verify runs a text decode step)."""
        return 0


def get_current_vllm_config_or_none():
    """The current config (the shim always has one: `_CURRENT`)."""
    return _CURRENT.get()


# what a multimodal model file asks of its ModelConfig: the (text-only) multimodal settings,
# and the generation config (llama4 reads its attention temperature tuning from it: none here)
ModelConfig.multimodal_config = property(lambda self: MultiModalConfig())
ModelConfig.get_multimodal_config = lambda self: MultiModalConfig()
ModelConfig.try_get_generation_config = lambda self: {}
ModelConfig.override_generation_config = property(lambda self: {})


import enum  # noqa: E402  (appended with the names that use it)


class CUDAGraphMode(enum.Enum):
    """How CUDA graphs are captured (vLLM's config/compilation.py names): a model file compares
    the forward context's mode against these; the shim captures none."""
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (2, 0)
    FULL_AND_PIECEWISE = (2, 1)


@dataclass
class SpeculativeConfig:
    """A speculative draft's settings as a draft model file reads them: the draft's own model
    config (`draft_model_config.hf_config`) and how many tokens it proposes per step."""
    draft_model_config: Any = None
    num_speculative_tokens: int = 1
    method: str = "draft_model"


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
        token = _CURRENT.set(config)
        try:
            yield
        finally:
            _CURRENT.reset(token)
    return block()


def set_current_vllm_config(vllm_config, check_compile=False, prefix=None):
    return _set_current(vllm_config)


def replace(instance, /, **changes):
    """vLLM's `vllm.config.replace` (config/utils.py): a copy of a config with the named fields
    changed, built through the class as `dataclasses.replace` does (a draft's VllmConfig with
    its own model config: interns2_mobius's MTP). The shim's per-instance attributes
    (`_per_instance`: scheduler and compilation config, vLLM's fields) are carried over, shared
    as vLLM's replace shares the objects it copies, or changed when named."""
    import dataclasses
    names = {f.name for f in dataclasses.fields(instance) if f.init}
    extra = [k for k in changes if k not in names]
    unknown = [k for k in extra if not isinstance(getattr(type(instance), k, None), property)]
    if unknown:
        raise TypeError(f"{type(instance).__name__} has no field {unknown[0]!r}")
    out = dataclasses.replace(instance, **{k: v for k, v in changes.items() if k in names})
    for k, v in instance.__dict__.items():
        if k not in names:
            out.__dict__.setdefault(k, v)
    for k in extra:
        setattr(out, k, changes[k])
    return out
