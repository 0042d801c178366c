"""What a caller may set when building a plan (`PlanOptions`), and the policy defaults
(configs/policy.yaml) every None option takes, checked once before any stage runs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError
from ..policy import Policy
from ..contract.grammar import is_dotted
from ..contract.plan import CALL_FORMS, MODES, SWITCH_KEY


@dataclass(frozen=True)
class PlanOptions:
    lookback: int | None = None
    tp: int = 1
    moe_tp: int = 1
    experts_per_rank: int | None = None
    targets: tuple[str, ...] = ()          # manual mode: CLASS.ATTR ...
    window: str | tuple[str, ...] | None = None   # manual mode: the dependency (one per target)
    dtype: str | None = None               # manual sizes: bf16 | fp16 | int8 (default: config's)
    mode: str | None = None                # eager | ge_graph | npugraph_ex
    call: str | None = None                # direct | side_stream (None: the mode's default)
    max_sites: int | None = None
    max_size_cap: int | None = None
    src_map: tuple[str, ...] = ()          # OLD=NEW path prefixes for stack frames
    max_query_len: int | None = None       # decode: tokens per sequence up to this (guard.max_len)
    lang: str = "en"
    top: int | None = None                 # memory-bound signatures examined
    out_dir: str | None = None             # plan folder: target files are written relative to it
    cmo_bw_gbps: float | None = None
    min_window_us: float | None = None
    config_path: str = SWITCH_KEY          # --switch: the dotted config key of the switch
    ranks: Any = None                      # --rank all: ranks.CrossRank (targets and windows
                                           # that hold on every rank); None for one rank
    policy: Policy | None = None           # the run's Policy: set by with_defaults, so every
                                           # step of the plan reads the one build_plan was given


def src_map_entries(pairs) -> tuple[str, ...]:
    """(OLD, NEW) path-prefix pairs as `PlanOptions.src_map` holds them (`OLD=NEW`): one
    spelling for the plan and the model source read ahead, whose key must match it."""
    return tuple(f"{a}={b}" for a, b in pairs)


def with_defaults(o: PlanOptions, pol: Policy) -> PlanOptions:
    mode = o.mode or pol["plan"].get("mode", "eager")
    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if o.call is not None and o.call not in CALL_FORMS:
        raise InputError(f"--call must be one of {', '.join(CALL_FORMS)}, not {o.call!r}")
    if mode == "ge_graph" and o.call == "side_stream":
        raise InputError("--call side_stream is not a ge_graph form (torchair orders npu_prefetch "
                         "by its dependency; no stream of its own): use --call direct")
    # manual mode: the targets the user names are the sites (unless --max-sites says fewer)
    default_sites = len(o.targets) if o.targets else pol["plan"]["max_sites"]
    max_sites = default_sites if o.max_sites is None else o.max_sites
    if max_sites < 1:
        raise InputError(f"--max-sites must be at least 1, not {max_sites}")
    if o.experts_per_rank is not None and o.experts_per_rank < 1:
        raise InputError(f"--experts-per-rank must be at least 1, not {o.experts_per_rank}")
    if o.moe_tp < 1:
        raise InputError(f"--moe-tp must be at least 1, not {o.moe_tp}")
    if not is_dotted(o.config_path):
        raise InputError(f"--switch must be a dotted config key (identifiers joined by '.', e.g. "
                         f"additional_config.enable_prefetch), not {o.config_path!r}")
    if o.lang not in ("en", "zh"):
        raise InputError(f"--lang must be en or zh, not {o.lang!r}")
    return replace(o, mode=mode, max_sites=max_sites, policy=pol,
                   max_query_len=o.max_query_len if o.max_query_len is not None
                   else int(pol["sizing"]["decode_max_query_len"]),
                   top=o.top if o.top is not None else int(pol["report"]["top_n"]),
                   lookback=o.lookback if o.lookback is not None else int(pol["windows"]["lookback"]))
