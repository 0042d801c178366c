"""`analyze` as values: an Analysis read once, and what it finds (Shortlist, Windows, Planned).
Nothing here writes a file except `Planned.save()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import pipeline
from ..errors import InputError
from ..i18n import said
from ..policy import Policy
from ..status import Status
from ..contract.plan import SWITCH_KEY

if TYPE_CHECKING:      # the types only: importing them here would load polars at `--help`
    import tempfile

    from ..contract.plan import Plan
    from ..hardware.part import HardwareProfile
    from ..plan.design_inputs import DesignInputs
    from ..profiling.table import Profile, ProfileInfo
    from ..ranks import CrossRank
    from ..roofline.classify import Roofline, SignatureCost
    from ..windows.types import Candidate, Rejection

Progress = Callable[..., None]     # progress(catalog key, **params), told each slow stage
DEFAULT_OUT = "cannbot-prefetch"   # analyze --out
DEFAULT_SWITCH = SWITCH_KEY         # analyze --switch


def _quiet(key: str, **params: Any) -> None:
    return None


# ---------------------------------------------------------------- analyze

@dataclass(frozen=True)
class Analysis:
    """A profile read once (or none: manual mode) on a resolved part, with its roofline."""

    profile: Profile | None             # KernelTable + info, None: manual
    hardware: HardwareProfile           # overrides applied
    roofline: Roofline | None           # None without a profile
    warnings: tuple[str, ...] = ()      # one-line warnings (an assumed part)
    notes: tuple[str, ...] = ()         # what reading and the roofline noticed
    cmo_bw_gbps: float | None = None    # the user's CMO rate: sizing binds it
    path: str | None = None             # the profile as given (a job folder with rank="all")
    ranks: CrossRank | None = None      # rank="all": per-rank statistics
    parked: tempfile.TemporaryDirectory | None = field(default=None, repr=False, compare=False)   # rank tables on disk
    policy: Policy = field(default_factory=Policy.load, repr=False, compare=False)
    # configs/policy.yaml, read once by load() and passed to every stage of this analysis

    @classmethod
    def load(cls, profile=None, *, rank: int | str | None = None, run: str | None = None,
             step: int | None = None, steps: tuple[int, int] | None = None,
             hardware: str | None = None, hbm_bw_tbps: float | None = None,
             peak_tflops: dict[str, float] | None = None, cmo_bw_gbps: float | None = None,
             keep_tables: bool = True, progress: Progress | None = None,
             policy: Policy | None = None) -> "Analysis":
        """Read `profile` (any supported export; None: manual mode) and classify it.
        `hardware`: a part name or YAML file (default: detected, else 910B3 with a warning).
        `rank`: one of several ranks (default the lowest), or "all": every rank, the slowest
        analysed in full; `keep_tables` then parks each rank's table in a temp folder, so
        windows() and plan() hold on every rank (removed by close()). `policy`: the thresholds
        (default configs/policy.yaml, read here once and kept for windows() and plan())."""
        pol = policy or Policy.load()
        tick = progress or _quiet
        warnings: list[str] = []

        def hardware_for(info):
            hw, said = pipeline.resolve_hardware(hardware, info, hbm_bw_tbps=hbm_bw_tbps,
                                                 peak_tflops=peak_tflops,
                                                 cmo_bw_gbps=cmo_bw_gbps, policy=pol)
            warnings.extend(w for w in said if w not in warnings)
            return hw

        loaded = roof = cross = parked = None
        if profile is not None:
            tick("progress.load", path=profile)
            if rank == "all":
                loaded, roof, cross, parked = pipeline.read_all_ranks(
                    profile, hardware_for, run=run, step=step, steps=steps,
                    keep_tables=keep_tables, policy=pol)
            else:
                loaded = pipeline.read_profile(profile, rank=rank, run=run, step=step,
                                               steps=steps, policy=pol)
        info = loaded.info if loaded is not None else None
        hw = hardware_for(info)
        notes = list(info.notes) if info else []
        if loaded is not None:
            tick("progress.roofline")
            roof = roof if roof is not None else pipeline.roofline(loaded, hw, pol)
            notes.extend(roof.notes)
            if cross is not None:
                notes.append(cross.note())
        return cls(loaded, hw, roof, tuple(warnings), tuple(notes), cmo_bw_gbps,
                   None if profile is None else str(profile), cross, parked, pol)

    def close(self) -> None:
        """Remove the parked rank tables (rank="all"); windows() and plan() then see the
        reference rank's windows only."""
        if self.parked is not None:
            self.parked.cleanup()

    def __enter__(self) -> "Analysis":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def info(self) -> ProfileInfo | None:
        """ProfileInfo (path, layout, level, counters, rank, steps, rows...), None: manual."""
        return self.profile.info if self.profile is not None else None

    @property
    def signatures(self) -> tuple[SignatureCost, ...]:
        """Every MatMul-family signature's roofline row (SignatureCost), by total time."""
        return self.roofline.signatures if self.roofline is not None else ()

    def top(self, n: int = 10) -> list[SignatureCost]:
        """The `n` memory-bound signatures (analytic or measured) with the most total time."""
        return pipeline.top(self.roofline, n)

    def shortlist(self, top: int = 10) -> "Shortlist":
        """Without model source: which top signatures are targets (memory-bound by the deciding
        verdict) and which are listed with the reason."""
        targets, not_targets = pipeline.shortlist(self.roofline, top, self.policy)
        return Shortlist(self, top, tuple(targets), tuple(not_targets))

    def windows(self, *, top: int = 10, lookback: int | None = None,
                min_window_us: float | None = None) -> "Windows":
        """The targets' dependency windows on the timeline (no model source needed)."""
        if self.roofline is None:
            raise InputError("windows need a profile (the timeline)")
        if self.ranks is not None:
            pipeline.measure_rank_windows(self.roofline, self.ranks, top, lookback, self.policy)
        not_targets, found = pipeline.windows(
            self.roofline, pipeline.plan_options(top=top, lookback=lookback,
                                                 min_window_us=min_window_us, ranks=self.ranks),
            self.policy)
        return Windows(tuple(found.candidates), tuple(not_targets) + tuple(found.rejections),
                       tuple(found.notes))

    def plan(self, model_src: str, model_config=None, *, targets: Sequence[str] = (),
             window: str | Sequence[str] | None = None, tp: int = 1, moe_tp: int = 1,
             experts_per_rank: int | None = None, dtype: str | None = None, mode: str = "eager",
             call: str | None = None, max_sites: int | None = None, max_size_cap: int | None = None,
             src_map: Sequence[tuple[str, str]] = (), top: int = 10,
             lookback: int | None = None, out: str | None = DEFAULT_OUT,
             switch: str = DEFAULT_SWITCH, lang: str = "en",
             progress: Progress | None = None) -> "Planned":
        """Windows -> mapping -> sizing -> Plan against `model_src` (a file, folder or module
        name). `targets` (CLASS.ATTR): manual mode; `window`: one dependency for every target,
        or one per target in the same order. `out`: the folder the plan will be saved in (its
        target paths are relative to it); `call`: direct | side_stream (None: the mode's
        default, docs/rewrite.md "Call form"); `switch`: the dotted config key that turns the
        sites on (`additional_config.enable_prefetch` for vllm-ascend, docs/rewrite.md "The
        switch per serving engine"); nothing is written here."""
        (progress or _quiet)("progress.plan")
        if self.ranks is not None and self.roofline is not None and not targets:
            pipeline.measure_rank_windows(self.roofline, self.ranks, top, lookback, self.policy)
        popts = pipeline.plan_options(
            lookback=lookback, tp=tp, moe_tp=moe_tp, experts_per_rank=experts_per_rank,
            targets=tuple(targets),
            window=window if window is None or isinstance(window, str) else tuple(window),
            dtype=dtype, mode=mode, call=call, max_sites=max_sites,
            max_size_cap=max_size_cap, src_map=src_map,
            lang=lang, top=top, out_dir=None if out is None else str(Path(out)),
            cmo_bw_gbps=self.cmo_bw_gbps, ranks=self.ranks, config_path=switch)
        plan, design, rejections = pipeline.build_plan(self.roofline, self.info, self.hardware,
                                                       model_src, model_config, popts,
                                                       self.policy)
        return Planned(self, top, plan, design, tuple(rejections), out)


@dataclass(frozen=True)
class Shortlist:
    """analyze without model source: the memory-bound targets, and the rest with a reason."""

    analysis: Analysis
    top: int
    targets: tuple[SignatureCost, ...]   # memory-bound by the deciding verdict
    not_targets: tuple[tuple[SignatureCost, str, str], ...]   # (cost, reason code, reason)
    status: Status = Status.OK

    @property
    def notes(self) -> tuple[str, ...]:
        if not self.targets:
            return ()
        return (said("said.pass_model_src"),)

    def to_json(self, outputs: Sequence[str] = ()) -> dict[str, Any]:
        """The `analyze --json` document (a shortlist writes nothing: `outputs` stays empty)."""
        from . import analysis_json as aj

        return aj.document(self.analysis, top=self.top,
                           candidates=[aj.shortlisted_json(s) for s in self.targets],
                           rejections=[aj.not_target_json(*r) for r in self.not_targets],
                           notes=list(self.notes), outputs=list(outputs))


@dataclass(frozen=True)
class Windows:
    candidates: tuple[Candidate, ...]    # target + window + decision row
    rejections: tuple[Rejection, ...]    # reason code + reason
    notes: tuple[str, ...] = ()
    status: Status = Status.OK


@dataclass(frozen=True)
class Planned:
    """A Plan and its design document, in memory until `save()`."""

    analysis: Analysis
    top: int
    plan: Plan                           # the prefetch_plan.yaml contract
    design: DesignInputs                 # what the design document shows
    rejections: tuple[Rejection, ...]    # targets not planned, and why
    out: str | None                      # the folder the plan belongs in
    status: Status = Status.OK

    PLAN_NAME = "prefetch_plan.yaml"
    DESIGN_NAME = "prefetch_design.md"

    @property
    def notes(self) -> tuple[str, ...]:
        extra = () if self.plan.sites else (said("said.nothing_planned"),)
        return tuple(self.design.notes) + extra

    def plan_text(self) -> str:
        from ..plan import dump_plan

        return dump_plan(self.plan)

    def design_text(self) -> str:
        from ..plan.design import render_design

        # the plan named as `--out` named its folder, so the printed commands run as printed
        # from where analyze ran (apply's default root is that folder's project)
        return render_design(self.design, plan_name=str(Path(self.out or ".") / self.PLAN_NAME))

    def files(self) -> dict[Path, str]:
        """Every output, rendered: {path: text}; the design's pictures (plan/picture.py) beside it."""
        from ..plan.picture import as_files, pictures

        out = Path(self.out if self.out is not None else ".")
        files = {out / self.PLAN_NAME: self.plan_text(), out / self.DESIGN_NAME: self.design_text()}
        files.update({out / name: svg for name, svg in as_files(pictures(self.design)).items()})
        return files

    def save(self) -> list[str]:
        """Write the plan, the design and its pictures into `out`, each atomically, once all are
        rendered. Pictures an earlier run left for layers this plan no longer has are removed,
        so the folder holds the design's own pictures only."""
        files = self.files()
        written = _write_all(files)
        out = Path(self.out if self.out is not None else ".")
        for old in sorted(out.glob("prefetch_design.layer*.svg")):
            if old not in files:
                old.unlink(missing_ok=True)
        return written

    def to_json(self, outputs: Sequence[str] = ()) -> dict[str, Any]:
        """The `analyze --json` document; `outputs`: what `save()` wrote."""
        from . import analysis_json as aj

        return aj.document(self.analysis, top=self.top,
                           candidates=[aj.site_json(v, self.analysis.hardware, self.analysis.policy)
                                       for v in self.design.sites],
                           rejections=[r.to_dict() for r in self.rejections],
                           notes=list(self.notes), outputs=list(outputs))


_LOAD_OPTIONS = ("rank", "run", "step", "steps", "hardware", "hbm_bw_tbps", "peak_tflops",
                 "cmo_bw_gbps", "policy")
_PLAN_OPTIONS = ("model_config", "targets", "window", "tp", "moe_tp", "experts_per_rank", "dtype",
                 "mode", "call", "max_sites", "max_size_cap", "src_map", "lookback", "out", "switch", "lang")


def analyze(profile=None, *, model_src: str | None = None, progress: Progress | None = None,
            top: int = 10, **options) -> Shortlist | Planned:
    """`cannbot prefetch analyze` without writing: a Shortlist, or with `model_src` (or manual
    `targets`) a Planned. `options`: Analysis.load's and Analysis.plan's keywords (the plan's
    are unused without model source, as on the command line)."""
    unknown = set(options) - set(_LOAD_OPTIONS) - set(_PLAN_OPTIONS)
    if unknown:
        raise TypeError(f"analyze() got unknown options: {', '.join(sorted(unknown))}")
    load = {k: options.pop(k) for k in _LOAD_OPTIONS if k in options}
    out = options.get("out", DEFAULT_OUT)
    if (model_src or options.get("targets")) and out is not None:
        pipeline.check_out_dir(out)   # before any work: a wrong --out is found in a second
    if profile is None and not options.get("targets"):
        raise InputError("a PROFILE path is required unless --target names the targets "
                         "(manual mode)")
    planning = bool(model_src or options.get("targets"))
    # with all ranks, their tables wait on disk for the windows only when a plan is built
    analysis = Analysis.load(profile, progress=progress, keep_tables=planning, **load)
    with analysis:
        if planning:
            if not model_src:
                raise InputError("--target needs --model-src (the model source to plan against)")
            return analysis.plan(model_src, top=top, progress=progress, **options)
        return analysis.shortlist(top)     # the plan's options have nothing to act on


def _write_all(files: dict[Path, str | bytes]) -> list[str]:
    """Write outputs rendered in full beforehand, as one set (atomic.write_set)."""
    from ..atomic import write_set

    try:
        return write_set(files)
    except OSError as exc:
        raise InputError(f"cannot write ({exc.strerror or exc})",
                         path=str(exc.filename or next(iter(files), ""))) from None
