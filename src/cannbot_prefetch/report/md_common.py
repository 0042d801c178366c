"""Shared pieces of the Markdown report and the console summary: the catalog accessor, the
bilingual names of checks, actions, signals, outcomes and banners, and the number formats."""

from __future__ import annotations

from ..fmt import number
from ..i18n import localize, pairs, t as text
from .measurements import Stat


class _T:
    """`t.k(key, **params)`: a catalog text (configs/messages.yaml) in the report's language;
    `t(en, zh)`: one of a code -> (English, Chinese) pair from the catalog's tables."""

    def __init__(self, lang: str):
        self.lang = lang
        self.zh = lang == "zh"

    def __call__(self, en: str, zh: str) -> str:
        return zh if self.zh else en

    def k(self, key: str, **params) -> str:
        return text(key, self.lang, **params)

    def loc(self, said) -> str:
        """A sentence the analysis stored in English (a reason, a note), in the report's language."""
        return localize(said, self.lang)


CHECK_NAMES = pairs("report.check")   # configs/messages.yaml
ACTION_NAMES = pairs("report.action")   # configs/messages.yaml
SIGNAL_NAMES = pairs("report.signal")   # configs/messages.yaml
SITE_OUTCOMES = pairs("report.outcome")   # configs/messages.yaml
BANNER_NAMES = pairs("report.banner")   # configs/messages.yaml
OVERALL = pairs("report.overall")   # configs/messages.yaml


def _f(x, nd: int = 2) -> str:
    """The report's numbers: fmt.number with two decimals unless told."""
    return number(x, nd)


def _stat(s: Stat | None) -> str:
    if s is None:
        return "–"
    return f"{s.mean:,.2f} ± {s.stdev:,.2f} (n={s.n})"


def _pct(before, after) -> str:
    if before in (None, 0) or after is None:
        return "–"
    return f"{(after - before) / before * 100:+.1f}%"


def _mark(ok: bool | None) -> str:
    return "✅" if ok else ("❌" if ok is False else "–")


