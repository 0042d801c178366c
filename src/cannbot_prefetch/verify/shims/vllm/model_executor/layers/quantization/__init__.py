"""No quantization at TP 1: the config type only, for annotations."""


class QuantizationConfig:
    pass
