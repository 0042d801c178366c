"""The class decorators of vLLM's pooling models (models/interfaces_base.py), run when a model
file is imported: each sets the attribute vLLM's sets and returns the class."""


def default_pooling_type(*, seq_pooling_type="LAST", tok_pooling_type="ALL"):
    """Sets `default_seq_pooling_type` / `default_tok_pooling_type` (vLLM's defaults)."""
    def mark(model):
        model.default_seq_pooling_type = seq_pooling_type
        model.default_tok_pooling_type = tok_pooling_type
        return model
    return mark


def attn_type(kind):
    """Sets `attn_type` ("decoder", "encoder_only", ...)."""
    def mark(model):
        model.attn_type = kind
        return model
    return mark


from vllm._standin import standins  # noqa: E402

__getattr__ = standins(__name__)
