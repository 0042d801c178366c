"""Embedding and LM head at TP 1."""
import torch
from torch import nn


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, **_):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_embeddings, embedding_dim) * 0.05)

    def forward(self, ids):
        return torch.nn.functional.embedding(ids, self.weight)


class ParallelLMHead(VocabParallelEmbedding):
    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight)

    def tie_weights(self, embed_tokens):
        """The head shares the embedding's weight (vLLM: `lm_head.tie_weights(embed_tokens)`)."""
        self.weight = embed_tokens.weight
        return self


# vLLM pads the vocabulary to a multiple of this for its kernels (vocab_parallel_embedding.py);
# the shim's embeddings are unpadded, the constant is what model files pass as `padding_size`
DEFAULT_VOCAB_PADDING_SIZE = 64
