"""The library face (docs/api.md): what each command does, as values you inspect before
anything is written.

    import cannbot_prefetch as cp

    a = cp.Analysis.load("profile/")                   # read once: a.signatures, a.top(5)
    planned = a.plan("modeling_llama.py", "config.json", out="out")   # nothing written
    planned.save()                      # out/prefetch_plan.yaml, out/prefetch_design.md
    rw = cp.apply("out/prefetch_plan.yaml")            # per-file outcomes + diffs
    rw.write()

Every result has a `status` (Status: OK, CHECK_FAILED, MISMATCH; its value is the CLI's exit
code). Unusable input raises InputError (status UNUSABLE_INPUT) before anything is written.
Writing is a separate, explicit call: `save()` / `write()`. cli/ is a thin layer over this.
`verify` and `report` are here as `api.verify` / `api.report` (the package's own `verify` and
`report` names are the stage packages).
"""

from ..errors import CannbotError, InputError
from ..status import Status
from .analysis import Analysis, Planned, Shortlist, Windows, analyze
from .reporting import Report, report
from .rewriting import Rewrite, apply, check, revert
from .verification import Verification, verify

__all__ = ["Analysis", "CannbotError", "InputError", "Planned", "Report", "Rewrite", "Shortlist",
           "Status", "Verification", "Windows", "analyze", "apply", "check", "report", "revert",
           "verify"]
