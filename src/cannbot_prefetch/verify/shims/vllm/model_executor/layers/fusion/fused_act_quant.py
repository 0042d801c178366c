"""No fused activation-and-quantize kernel: the activation alone."""


def maybe_fused_act_quant(act_fn, x, next_layer=None):
    return act_fn(x)
