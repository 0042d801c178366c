"""See the package: the config type only."""
from . import QuantizationConfig  # noqa: F401
