"""The design's "across ranks" part (`analyze --rank all`): per rank, the step and busy time
and each planned target's time, verdict and window, as a small table and a text bar chart.

A pure function of DesignInputs (its `ranks` is a ranks.CrossRank); texts from the catalog.
"""

from __future__ import annotations

from typing import Any

from ..i18n import t

_SHOWN = 16          # more ranks than this: the slowest and the fastest, with the count between
_BAR = 24            # chart width in characters


def rank_lines(d: Any) -> list[str]:
    cross = d.ranks
    if cross is None:
        return []
    from ..ranks import signature_key

    lang = d.lang
    views = list(cross.views)
    shown = [(f"{v.site.target.cls}.{v.site.target.attr}", v.candidate.target)
             for v in d.sites if v.planned and v.candidate is not None]
    ref = cross.view(cross.reference)
    if not shown and ref.signatures:         # nothing planned: the reference's largest
        top = max(ref.signatures, key=lambda s: s.total_us)
        shown = [(f"{top.type} {top.input_shapes or ''}".strip(), top)]
    targets = [s for _, s in shown]
    L = [f"### {t('design.ranks.title', lang, n=len(views), ref=cross.reference)}", "",
         t("design.ranks.rule", lang, share=f"{cross.pace_share:.0%}"), ""]
    head = [t("design.ranks.rank", lang), t("design.ranks.step", lang),
            t("design.ranks.busy", lang)]
    for label, _ in shown:
        head += [t("design.ranks.mean", lang, target=label), t("design.ranks.verdict", lang),
                 t("design.ranks.window", lang)]
    L += ["| " + " | ".join(head) + " |", "|" + "---:|" * 3 + "---:|---|---:|" * len(targets)]
    for v in _shown(views):
        if v is None:
            L.append("| … |" + " |" * (len(head) - 1))
            continue
        cells = [f"{v.rank}{' *' if v.rank == cross.reference else ''}", _us(v.step_us),
                 _us(v.busy_us)]
        for s in targets:
            key = signature_key(s)
            r = v.sigs.get(key)
            win = [w for (k, _c), w in v.windows.items() if k == key]
            cells += [_us(r.mean_us if r else None), r.verdict if r else "–",
                      _window(win, lang)]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    if shown:
        label, chart_sig = shown[0]
        key = signature_key(chart_sig)
        per = [(v.rank, v.sigs[key].total_us) for v in views if key in v.sigs]
        top = max((x for _, x in per), default=0.0)
        if top > 0:
            L += [t("design.ranks.chart", lang, sig=label), "", "```"]
            for rank, x in per if len(per) <= _SHOWN else _ends(per):
                bar = "█" * max(1, round(_BAR * x / top)) if x > 0 else ""
                L.append(f"rank {rank:>4} {bar:<{_BAR}} {x:,.1f} µs")
            L += ["```", ""]
    return L


def _shown(views: list) -> list:
    if len(views) <= _SHOWN:
        return views
    slow = sorted(views, key=lambda v: -v.busy_us)
    keep = {v.rank for v in slow[:_SHOWN // 2 + 4]} | {v.rank for v in slow[-(_SHOWN // 2 - 4):]}
    out: list = []
    for v in views:
        if v.rank in keep:
            out.append(v)
        elif out and out[-1] is not None:
            out.append(None)
    return out


def _ends(per: list[tuple[int, float]]) -> list[tuple[int, float]]:
    by = sorted(per, key=lambda p: -p[1])
    return sorted(by[:_SHOWN // 2] + by[-(_SHOWN // 2):])


def _us(v: float | None) -> str:
    return "–" if v is None else f"{v:,.1f}"


def _window(win: list[tuple[float | None, str]], lang: str) -> str:
    if not win:
        return "–"
    times = [w for w, _ in win]
    if any(w is None for w in times):
        return t("design.ranks.no_window", lang)
    return f"{min(times):,.1f}"
