"""vllm.distributed.communication_op: the collectives of one rank (each the identity), the same
functions `vllm.distributed` exports."""
from vllm.distributed import (  # noqa: F401 - re-exported as vLLM's module does
    tensor_model_parallel_all_gather,
    tensor_model_parallel_all_reduce,
    tensor_model_parallel_reduce_scatter,
)
