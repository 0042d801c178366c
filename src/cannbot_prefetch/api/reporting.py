"""`report` as a value: the ReportData of a plan against its profiles, with a status (MISMATCH
when a banner says the profiles do not fit the plan); every output is rendered in memory and
written only by `Report.write()`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import pipeline
from ..status import Status

if TYPE_CHECKING:      # the type only: report/ loads polars, not wanted at `--help`
    from ..report.build import ReportData


def report_path(out) -> Path:
    """`out` names the Markdown file; an existing folder gets `report.md` inside."""
    p = Path(out)
    return p / "report.md" if p.exists() and p.is_dir() else p


@dataclass(frozen=True)
class Report:
    data: ReportData

    @property
    def banners(self) -> tuple:
        """Mismatches (different models or hardware, sites not found): code + text."""
        return self.data.banners

    @property
    def status(self) -> Status:
        return Status.MISMATCH if self.banners else Status.OK

    @property
    def overall(self) -> str:
        """success | unconfirmed | no_change | not_successful | worth_trying | ..."""
        return self.data.overall

    def outputs(self, out="report.md", lang: str = "en") -> dict[Path, str | bytes]:
        """report.md, the roofline chart, the next-step plan and the A/B script beside it,
        rendered: {path: content}."""
        from ..report.output import render_outputs

        return render_outputs(self.data, report_path(out), lang)

    def write(self, out="report.md", lang: str = "en") -> list[str]:
        """Render everything, then write each file atomically; returns the paths written."""
        from ..plan import resolve_source
        from ..report.output import write_outputs

        d = self.data
        keep = [d.plan_path, *(resolve_source(d.plan_path, s.target.file) for s in d.plan.sites)]
        if d.plan.switch.config_file:
            keep.append(resolve_source(d.plan_path, d.plan.switch.config_file))
        return write_outputs(self.outputs(out, lang), keep)

    def to_json(self, written=()) -> dict[str, Any]:
        """The `report --json` document; `written`: what `write()` returned."""
        from ..report.build import data_to_json

        return data_to_json(self.data, {Path(p).name: p for p in written})

    def mismatch_text(self) -> str:
        return "; ".join(b.text for b in self.banners)


def report(plan, baseline=None, *, optimized=None, verify_result=None,
           hardware: str | None = None, rank: int | None = None,
           steps: tuple[int, int] | None = None, progress=None) -> Report:
    """Plan x baseline profile (x optimized profile, x verify.json) -> Report. With a baseline
    only: the expected-gain analysis; with the plan alone: the expected gain from its shapes and
    hardware ("unknown" where a profile is needed). The plan's hardware is used unless
    `hardware` names one."""
    if progress is not None:
        progress("progress.report")
    return Report(pipeline.report(plan, baseline, optimized=optimized,
                                  verify_result=verify_result, hardware=hardware, rank=rank,
                                  steps=steps))
