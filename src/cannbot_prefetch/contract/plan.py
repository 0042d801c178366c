"""The plan's values (`prefetch_plan.yaml`): the contract between analyze, apply and report.

A leaf: it imports nothing from the stages, so every stage that builds toward the plan (mapping's
places, sizing's basis and caps, gain's savings, legality's checks) imports these types without
pulling in plan/ (its builder, validation and YAML files). plan/schema.py re-exports them.

Keys follow ../shared/docs/CONTRACTS.md "Plan"; docs/plan.md in this repo documents each one
and the few this project adds where the contract is silent (`guard`, `max_tokens`,
`target.scope`, `window`). Anchors name calls and variables, never line numbers, so a plan survives edits
that do not touch the sites. Reading and validating a plan (once, on load, with the key path in
the error) is plan/validate.py, the plain-data form plan/schema.py, the files plan/store.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .. import __version__

PLAN_VERSION = 1
STATUSES = ("proposed", "applied")
MODES = ("eager", "ge_graph", "npugraph_ex")
# How the prefetch is issued (docs/rewrite.md "Call form"): `direct` calls torch_npu.npu_prefetch
# on the current stream; `side_stream` issues it on a side stream that waits for the current one
# and is joined at the method's end. The default is what each mode's own documentation
# recommends (cann-recipes-infer docs/cann/en/prefetch_principles.md: in eager and ge_graph
# modes call npu_prefetch directly, without a hand-written stream/event layer that can add
# synchronisation waits; npugraph_ex uses an explicit stream joined once at the end).
CALL_FORMS = ("direct", "side_stream")
DEFAULT_CALL = {"eager": "direct", "ge_graph": "direct", "npugraph_ex": "side_stream"}


def call_form(mode: str, call: str | None = None) -> str:
    """The plan's call form: `call` when given, else the mode's recommended one."""
    return call or DEFAULT_CALL.get(mode, "direct")
MAPPINGS = ("stack", "shape", "manual")
POSITIONS = ("before", "after")
SCOPES = ("same", "next_layer")


@dataclass(frozen=True)
class Target:
    file: str            # model source file, relative to the plan's directory or absolute
    cls: str             # class owning the weight's module, e.g. LlamaMLP
    attr: str            # attribute, e.g. gate_proj (or experts.gate_up_proj for fused Parameters)
    weight_expr: str     # expression valid in insert.method, e.g. self.mlp.gate_proj.weight
    scope: str = "same"  # same | next_layer (the weight belongs to the next decoder layer)
    # next_layer: the other paths the next layer may hold the same class's weight by (a dense
    # MLP built as `mlp` in some layers and as `mlp.shared_experts` in others); at run time the
    # first of weight_expr, *alt_weight_exprs that the next layer holds is prefetched
    alt_weight_exprs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Insert:
    cls: str             # class whose method receives the call (lowest common caller)
    method: str          # e.g. forward
    anchor_call: str     # the call the prefetch is placed around, e.g. self.mlp or self.o_proj
    position: str        # before | after the statement holding anchor_call (POSITIONS)


@dataclass(frozen=True)
class Join:
    cls: str
    method: str
    # end | before:<call> | after:<call> (eager / npugraph_ex side stream); the plan file's key
    # is `join.where` (docs/contracts.md), the code's one name for "where it goes" is position
    position: str = "end"


@dataclass(frozen=True)
class Cap:
    name: str            # weight | cmo_rate_x_window | hbm_headroom | l2_budget | user
    bytes: int
    note: str = ""
    binding: bool = True  # False: shown as a risk, does not bound max_size (an unverified figure)


@dataclass(frozen=True)
class Basis:
    dims: tuple[int, ...]         # weight dims as stored
    dtype_bytes: float
    coefficient: float
    caps: tuple[Cap, ...] = ()
    bound_by: str = "coefficient"  # which cap (or the coefficient) set max_size
    formula: str = ""              # the seed formula used, e.g. "H*I*2*b*c"


@dataclass(frozen=True)
class Saving:
    low: float
    mid: float
    high: float


@dataclass(frozen=True)
class Guard:
    """Decode-only runtime guard (CONTRACTS.md "Defaults"): prefetch only while
    `<expr>.shape[dim] <= max_len`, i.e. while the tokens per sequence (query length) read from
    that tensor stay in decode range, at any batch size."""

    expr: str            # local name or dotted attribute path valid at the insertion point
    dim: int             # the query-length dim of that tensor (may be negative: -2 of [B, S, H])
    max_len: int         # >= 1: tokens per sequence up to which it is still decode


@dataclass(frozen=True)
class Site:
    id: str
    target: Target
    insert: Insert
    dependency: str               # dependency{expr}: a variable defined before the insertion
    join: Join
    max_size: int
    basis: Basis
    ladder: dict[str, list[float]]  # {"up": [0.7, 1.0], "down": [0.3, 0.1]}
    mapping: str
    evidence: dict[str, Any]
    saving_us: Saving | None      # per step; None = unknown (manual mode without a profile)
    source_sha256: str
    max_tokens: int | None = None  # old token-count guard (superseded by `guard`)
    guard: Guard | None = None     # decode guard: tensor + dim read at runtime


def decode_guard_text(site: "Site") -> str:
    """The site's decode guard as shown in tables: `expr.shape[dim] <= max_len`, the older
    token count, or "-" (no guard: it also prefetches in prefill)."""
    if site.guard is not None:
        g = site.guard
        return f"{g.expr}.shape[{g.dim}] <= {g.max_len}"
    return f"tokens <= {site.max_tokens}" if site.max_tokens is not None else "-"


# The switch a user turns without the config (read at build time in the process that builds the
# model: vLLM workers inherit it) and the run-time sizes; docs/rewrite.md "The switch".
ENV_SWITCH = "CANNBOT_PREFETCH"        # 1 / 0; wins over the config
ENV_SIZE = "CANNBOT_PREFETCH_SIZE"     # "0.7" or "site-a=0.7,site-b=1048576"
SIZE_KEY = "prefetch_size"             # config key beside the switch's key: sizes

# The config key that turns the sites on, unless analyze --switch names another (a dotted path:
# vllm-ascend's `additional_config.enable_prefetch`, a runner YAML's `custom_params.enable_prefetch`).
SWITCH_KEY = "enable_prefetch"


@dataclass(frozen=True)
class Switch:
    name: str = SWITCH_KEY
    default: bool = False
    config_path: str = SWITCH_KEY   # e.g. additional_config.enable_prefetch, custom_params.enable_prefetch
    config_file: str | None = None         # YAML runner config to add the key to, if any

    @property
    def size_path(self) -> str:
        """The config key of the run-time sizes: `prefetch_size` beside the switch's key."""
        parent = self.config_path.rsplit(".", 1)[0] + "." if "." in self.config_path else ""
        return parent + SIZE_KEY


@dataclass(frozen=True)
class Plan:
    sites: tuple[Site, ...]
    mode: str = "eager"
    switch: Switch = field(default_factory=Switch)
    status: str = "proposed"
    created_from: dict[str, Any] = field(default_factory=dict)
    rejections: tuple[dict[str, Any], ...] = ()
    version: int = PLAN_VERSION
    tool_version: str = __version__
    call: str | None = None       # direct | side_stream; None: the mode's default (call_form)

    @property
    def call_form(self) -> str:
        return call_form(self.mode, self.call)

    def with_status(self, status: str) -> "Plan":
        return replace(self, status=status)
