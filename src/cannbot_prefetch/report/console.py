"""The human summary of a report for the terminal (rich). Data in, renderables out."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .build import ReportData
from ..fmt import number
from .md_common import ACTION_NAMES, CHECK_NAMES, OVERALL, _T




def print_summary(d: ReportData, written: list[str], lang: str, console: Console) -> None:
    t = _T(lang)
    for b in d.banners:
        console.print(f"[bold red]{t.k('report.console.mismatch')}:[/] {b.text}")
    en, zh = OVERALL[d.overall]
    style = {"success": "green", "worth_trying": "green", "inconclusive": "red",
             "no_change": "yellow"}.get(d.overall, "yellow")
    console.print(f"[bold {style}]{t(en, zh)}[/]")
    if d.verdicts:
        tab = Table(title=t.k('report.console.success_rule_per_site'))
        tab.add_column(t.k('report.console.site'))
        for key in ("target_faster", "critical_path_shorter", "window_stable", "outputs_identical"):
            tab.add_column(t(*CHECK_NAMES[key]))
        tab.add_column(t.k('report.console.next_step'))
        for v in d.verdicts:
            cells = []
            for c in v.checks:
                mark = "✓" if c.ok else ("✗" if c.ok is False else "–")
                change = f" {c.change_pct:+.1f}%" if c.change_pct is not None else ""
                cells.append(mark + change)
            tab.add_row(v.site_id, *cells, t(*ACTION_NAMES[v.action]))
        console.print(tab)
    if d.expectation is not None:
        e = d.expectation
        tab = Table(title=t.k('report.console.expected_gain_benefit_model_baseline_only'))
        for col in (t.k('report.console.site'), t.k('report.console.target_s'),
                    t.k('report.console.saving_s_step_low_mid_high'), t.k('report.console.share_mid')):
            tab.add_column(col)
        for s in e.sites:
            share = f"{s.share[1] * 100:.1f}%" + (" !" if s.optimistic else "") if s.share else "–"
            saving = (" / ".join(f"{x:.1f}" for x in s.step_saving_us) if s.step_saving_us
                      else t.k('report.console.unknown_no_profile'))
            tab.add_row(s.site_id, number(s.target_us, 2), saving, share)
        console.print(tab)
        if e.e2e_share:
            console.print(t.k('report.console.end_to_end_low_mid_high')
                          + " / ".join(f"{x * 100:.2f}%" for x in e.e2e_share) + f" — {e.reason_in(lang)}")
    for p in written:
        console.print(f"[dim]{t.k('report.console.wrote')} {p}[/]")
