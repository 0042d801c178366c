"""Activations by name, and the gated ones: act(first half) * second half of the last dim."""
import torch
from torch import nn

_ACTS = {"silu": nn.functional.silu, "swish": nn.functional.silu, "relu": nn.functional.relu,
         "gelu": nn.functional.gelu, "gelu_new": lambda x: nn.functional.gelu(x, approximate="tanh"),
         "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),
         "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}


class _Act(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class _AndMul(nn.Module):
    fn = staticmethod(nn.functional.silu)

    def __init__(self, *_, **__):
        super().__init__()

    def forward(self, x):
        d = x.shape[-1] // 2
        return self.fn(x[..., :d]) * x[..., d:]


class SiluAndMul(_AndMul):
    pass


class SiluAndMulWithClamp(_AndMul):
    pass


class GeluAndMul(_AndMul):
    fn = staticmethod(nn.functional.gelu)


class FatreluAndMul(_AndMul):
    fn = staticmethod(nn.functional.relu)


class MulAndSilu(_AndMul):
    pass


def get_act_fn(name: str) -> nn.Module:
    return _Act(_ACTS.get(str(name).lower(), nn.functional.silu))


def get_act_and_mul_fn(name: str) -> nn.Module:
    mod = _AndMul()
    mod.fn = _ACTS.get(str(name).lower(), nn.functional.silu)
    return mod


# squared ReLU (nemotron_h's MLP: vLLM's ReLUSquaredActivation)
_ACTS["relu2"] = lambda x: torch.relu(x).square()


class QuickGELU(_Act):
    """x * sigmoid(1.702 x) (vLLM's activation.QuickGELU)."""

    def __init__(self, *_, **__):
        super().__init__(_ACTS["quick_gelu"])


class _Registry(dict):
    """vLLM's `_ACTIVATION_REGISTRY` (a lazy dict, activation.py): `registry[name]` is a new
    activation module of that name."""

    def __getitem__(self, name):
        return _Act(super().__getitem__(str(name).lower()))


_ACTIVATION_REGISTRY = _Registry({**_ACTS, "gelu_fast": _ACTS["gelu_new"],     # relu2: _ACTS'
                                  "tanh": torch.tanh, "sigmoid": torch.sigmoid})


class GeluAndMulSparse(nn.Module):
    """Gemma 3n's sparse gated GELU: the gate half keeps only what lies above its mean plus
    `std_multiplier` standard deviations (the normal quantile of `activation_sparsity`),
    shifted down by that cut-off, then gelu(gate) * up."""

    def __init__(self, activation_sparsity: float, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate
        self.std_multiplier = torch.distributions.Normal(0.0, 1.0).icdf(
            torch.tensor(float(activation_sparsity))).item()

    def forward(self, x):
        d = x.shape[-1] // 2
        gate = x[..., :d]
        cut = gate.mean(-1, keepdim=True) + gate.std(-1, keepdim=True, unbiased=False) * \
            self.std_multiplier
        gate = nn.functional.relu(gate - cut)
        return nn.functional.gelu(gate, approximate=self.approximate) * x[..., d:]


class XIELU(nn.Module):
    """xIELU (arXiv 2411.13010), the formula in plain torch: for x > 0 `a_p x^2 + beta x`, else
    `a_n (expm1(min(x, eps)) - x) + beta x`, with a_p = softplus(alpha_p) and
    a_n = beta + softplus(alpha_n) learned (initialised so a_p, a_n start at the init values)."""

    def __init__(self, alpha_p_init=0.8, alpha_n_init=0.8, beta=0.5, eps=-1e-6,
                 dtype=torch.bfloat16, with_vector_loads=False):
        super().__init__()
        inv_softplus = lambda v: torch.log(torch.expm1(torch.tensor(float(v)))).reshape(1)  # noqa: E731
        self.alpha_p = nn.Parameter(inv_softplus(alpha_p_init))
        self.alpha_n = nn.Parameter(inv_softplus(alpha_n_init - beta))
        self.beta, self.eps = float(beta), float(eps)

    def forward(self, x):
        a_p = nn.functional.softplus(self.alpha_p).to(x.dtype)
        a_n = (self.beta + nn.functional.softplus(self.alpha_n)).to(x.dtype)
        neg = (torch.expm1(torch.clamp(x, max=self.eps)) - x) * a_n
        return torch.where(x > 0, a_p * x * x, neg) + self.beta * x


class SwigluStepAndMul(_AndMul):
    """step3p5's clamped SwiGLU: silu(gate) clamped above at `limit`, times up clamped to
    [-limit, limit] (no clamp when `limit` is None)."""

    def __init__(self, limit=None, *_, **__):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        d = x.shape[-1] // 2
        gate, up = nn.functional.silu(x[..., :d]), x[..., d:]
        if self.limit is not None:
            gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        return gate * up
