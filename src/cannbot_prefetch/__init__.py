"""cannbot-prefetch: profile-driven weight prefetch for Ascend NPU inference.

Data flows one way: profile -> KernelTable -> roofline -> windows -> mapping -> sizing
-> plan -> rewrite / report; `pipeline.py` calls the stages in that order. The library face is
`api/` (docs/api.md), exported here lazily so this import stays cheap.
"""

__version__ = "0.1.0"
_API = ("Analysis", "CannbotError", "InputError", "Planned", "Report", "Rewrite", "Shortlist",
        "Status", "Verification", "Windows", "analyze", "apply", "check", "revert")
__all__ = ["__version__", *_API]


def __getattr__(name):
    if name not in _API:   # verify / report: the stage packages; api.verify / api.report
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import api
    return getattr(api, name)
