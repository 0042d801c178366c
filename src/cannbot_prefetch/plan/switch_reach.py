"""Where the switch a user sets cannot reach a site, said at plan time.

The rewrite stores the switch in `__init__` of each class that holds a site
(`self.enable_prefetch = _cbp.read_switch(config, ...)`); the helper reads it from the layer's own
config, else from the config of the model being built (sub-configs and layers built without a
config included: docs/rewrite.md "The switch"). A class with no `__init__` of its own has no
such line: its call reads `_cbp.enabled()` at run time, which only the environment switch (or
the helper's ENABLED) turns on, so the config switch does not reach it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contract.plan import ENV_SWITCH

if TYPE_CHECKING:  # pragma: no cover
    from ..mapping.source import ModelSource
    from ..contract.plan import Site, Switch


def unreachable_notes(ms: "ModelSource", sites: "tuple[Site, ...]", switch: "Switch") -> list[str]:
    """One note per site whose class the config switch cannot reach, saying what to set."""
    out = []
    for s in sites:
        got = ms.classes.get(s.insert.cls)
        if got is not None and "__init__" not in got[1].methods:
            out.append(f"site {s.id}: {s.insert.cls} has no __init__ of its own, so "
                       f"`{switch.config_path}` in the config does not reach it; it runs only "
                       f"with {ENV_SWITCH}=1 in the environment of the process that runs the "
                       f"model (or the helper's ENABLED = True)")
    return out
