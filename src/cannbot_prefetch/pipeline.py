"""The stages, called in order. Read this first.

analyze: profile -> KernelTable -> roofline -> windows -> mapping -> sizing -> plan
apply:   plan -> rewrite (files)          report: plan x profiles -> Markdown + chart
verify:  plan x user factory -> switch off/on checks

Each function returns data; cli/ renders it. Nothing here prints.
"""

from __future__ import annotations
