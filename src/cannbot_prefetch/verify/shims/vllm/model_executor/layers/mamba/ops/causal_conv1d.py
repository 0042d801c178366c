"""vLLM's causal depthwise convolution kernels (`causal_conv1d_fn` for prefill,
`causal_conv1d_update` for decode against the conv state) as a model file imports them
(bailing_moe_v3's KDA mixer). A model calls them only on its state cache, inside the branch
that runs when the step carries attention metadata; the shim's steps carry none (the forward
context's `attn_metadata` is None, as in vLLM's profile run) and allocate no state, so a TP-1
decode step never reaches them: named stand-ins that raise when called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
