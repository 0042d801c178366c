"""Logits from the LM head's weight (no sampling metadata, no soft cap)."""
import torch
from torch import nn


class LogitsProcessor(nn.Module):
    def __init__(self, vocab_size, org_vocab_size=None, scale=1.0, **_):
        super().__init__()
        self.scale = scale

    def forward(self, lm_head, hidden_states, *_, **__):
        return torch.nn.functional.linear(hidden_states, lm_head.weight) * self.scale
