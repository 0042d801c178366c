"""Build plan Sites directly in tests (no analyze run needed)."""

from __future__ import annotations

from cannbot_prefetch.legality import Placement, dependency_problem
from cannbot_prefetch.plan import Basis, Guard, Insert, Join, Plan, Saving, Site, Switch, Target


def site(id, *, file="model.py", cls, attr, weight, icls, method="forward", anchor, position="before",
         dep, jcls=None, jmethod=None, where="end", size=1 << 20, max_tokens=None,
         scope="same", sha="", guard=None) -> Site:
    """guard: (expr, dim, max_len) or None."""
    return Site(
        id=id,
        target=Target(file, cls, attr, weight, scope),
        insert=Insert(icls, method, anchor, position),
        dependency=dep,
        join=Join(jcls or icls, jmethod or method, where),
        max_size=size,
        basis=Basis((64, 64), 2.0, 0.5),
        ladder={"up": [0.7, 1.0], "down": [0.3, 0.1]},
        mapping="manual",
        evidence={},
        saving_us=Saving(0.0, 0.0, 0.0),
        source_sha256=sha,
        max_tokens=max_tokens,
        guard=Guard(*guard) if guard is not None else None,
    )


def plan(*sites: Site, mode="eager", config_path="enable_prefetch", config_file=None) -> Plan:
    return Plan(sites=tuple(sites), mode=mode,
                switch=Switch(config_path=config_path, config_file=config_file))


def legal(code: str, s: Site) -> str | None:
    """legality.dependency_problem for a Site (None: legal)."""
    return dependency_problem(code, Placement.of_site(s), s.target)
