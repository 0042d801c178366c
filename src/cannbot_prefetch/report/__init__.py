"""Stage 7b: plan x profiles -> report (Markdown, chart, next-step plan, A/B script).

build.py assembles the data (measurements come from report/measure.py as the frozen values of measurements.py),
rules.py holds the seed's success rule and failure table, expected.py the baseline-only
analysis, markdown.py / chart.py / abscript.py render, output.py writes, console.py (rich) is
the human summary for the CLI.
"""

from .build import Banner, ReportData, VerifySummary, build_report, data_to_json, parse_verify
from .output import output_paths, render_outputs, write_outputs
from .rules import Thresholds

__all__ = ["Banner", "ReportData", "Thresholds", "VerifySummary", "build_report", "data_to_json",
           "output_paths", "parse_verify", "render_outputs", "write_outputs"]
