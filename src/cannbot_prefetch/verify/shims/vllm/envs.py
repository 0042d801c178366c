"""vLLM's environment settings (`vllm.envs`), each at its default: a model file reads a few while
it builds (deepseek_v2's VLLM_DCP_Q_REPLICATE, lfm2's VLLM_MOE_SKIP_PADDING); a name not listed
reads as unset (False)."""


def is_set(name: str) -> bool:
    return False


def __getattr__(name: str):
    if name.startswith("VLLM_"):
        return False
    raise AttributeError(name)
