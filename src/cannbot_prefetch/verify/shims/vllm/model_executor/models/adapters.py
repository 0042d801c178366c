"""vLLM's pooling / classification wrappers of a causal LM: the class itself (verify runs the
decoder, never a pooling head)."""


def as_embedding_model(cls):
    return cls


def as_seq_cls_model(cls):
    return cls


def as_reward_model(cls):
    return cls
