"""Tensor parallelism of one rank."""


def get_tensor_model_parallel_world_size() -> int:
    return 1


def get_tensor_model_parallel_rank() -> int:
    return 0


def tensor_model_parallel_all_reduce(x):
    return x


def tensor_model_parallel_all_gather(x, dim=-1):
    return x


def tensor_model_parallel_reduce_scatter(x, dim=0):
    return x


class _Group:
    """One rank of a group of one (pipeline, tensor, expert parallel at size 1)."""
    world_size = 1
    rank_in_group = 0
    is_first_rank = True
    is_last_rank = True
    device_group = None       # set below: a process group of one rank


class _OneRankGroup:
    """What a model file asks of a torch process group (`get_ep_group().device_group.size()`)."""

    def size(self) -> int:
        return 1

    def rank(self) -> int:
        return 0


_Group.device_group = _OneRankGroup()


def get_pp_group() -> _Group:
    return _Group()


def get_tp_group() -> _Group:
    return _Group()


def get_ep_group() -> _Group:
    return _Group()


def get_dp_group() -> _Group:
    return _Group()


def split_tensor_along_last_dim(x, num_partitions, contiguous_split_chunks=False):
    return x.chunk(num_partitions, dim=-1)


def divide(numerator: int, denominator: int) -> int:
    """Exact integer division (vLLM's distributed.utils.divide asserts divisibility)."""
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


def get_pcp_group() -> _Group:
    """Prefill context parallelism: a group of one rank."""
    return _Group()
