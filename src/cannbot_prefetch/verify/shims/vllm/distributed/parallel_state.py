"""Groups of one rank (see the package)."""
from . import get_ep_group, get_pp_group, get_tp_group  # noqa: F401
