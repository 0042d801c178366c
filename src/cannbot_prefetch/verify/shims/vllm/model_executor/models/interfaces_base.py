"""vLLM's base interfaces of a model class (interfaces_base.py) as a model file imports them at
class-definition time: the pooling-type decorator records its defaults on the class; other
names are stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins


def default_pooling_type(*, seq_pooling_type="LAST", tok_pooling_type="ALL"):
    """Class decorator: the pooling types a pooling wrapper uses unless told otherwise."""
    def mark(model):
        model.default_seq_pooling_type = seq_pooling_type
        model.default_tok_pooling_type = tok_pooling_type
        return model
    return mark


__getattr__ = standins(__name__)
