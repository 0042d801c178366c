"""Instances of one signature grouped by call site (first model frame, else predecessors)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _first_model_frame(stack: str) -> str:
    for fr in stack.split(";"):
        fr = fr.strip()
        if fr and "/torch/" not in fr and "site-packages/torch" not in fr and not fr.startswith("<"):
            return fr
    return ""


def _cluster(per, inst, lookback) -> list[tuple[list[tuple[tuple, int]], int]]:
    """Group instances by call site, ordered by first seen; each group with its `site_rank`.

    With stacks the call site is the first model frame; one source line can run the signature
    twice in a row (`self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))`), so an
    instance that follows one of the same frame within `lookback` ops takes the next rank.
    Without stacks the site is told by the types and shapes of the predecessors; small groups
    (layer 0 sees the embedding, not the previous layer) fold into a big group with the same
    nearest predecessor type, and the rank is the group's order."""
    by_frame: dict[Any, list] = defaultdict(list)
    by_preds: dict[Any, list] = defaultdict(list)
    last: dict[tuple, tuple[int, int]] = {}
    for key, j in sorted(inst, key=lambda kj: (kj[0][0] is None, str(kj[0]), kj[1])):
        seq = per[key]
        frame = _first_model_frame(seq[j].stack) if seq[j].stack else ""
        if frame:
            prev = last.get((key, frame))
            rank = prev[1] + 1 if prev is not None and j - prev[0] - 1 <= lookback else 0
            last[(key, frame)] = (j, rank)
            by_frame[(frame, rank)].append((key, j))
        else:
            preds = tuple((p.type, p.shapes) for p in seq[max(0, j - lookback):j][::-1])
            by_preds[("", preds)].append((key, j))
    first = lambda m: min(per[k][j].start for k, j in m)
    # a frame at a `def` line (PyTorch CPU traces) covers several calls: split by the nearest
    # predecessor's type too (q_proj after RmsNorm, o_proj after attention)
    framed: dict[str, list] = defaultdict(list)
    for (frame, _rank), members in by_frame.items():
        near: dict[Any, list] = defaultdict(list)
        for k, j in members:
            near[("", ((per[k][j - 1].type, ""),) if j else ())].append((k, j))
        framed[frame] += list(_merge_minor(near).values())
    out = []
    for frame, groups in framed.items():
        out += [(m, i) for i, m in enumerate(sorted(groups, key=first))]
    merged = sorted(_merge_minor(by_preds).values(), key=first)
    out += [(m, i) for i, m in enumerate(merged)]
    return sorted(out, key=lambda mr: first(mr[0]))


def _merge_minor(groups):
    total = sum(len(v) for v in groups.values())
    big = {k: v for k, v in groups.items() if len(v) > max(1, total // 10)}
    if not big:
        return groups
    out = {k: list(v) for k, v in big.items()}
    for k, v in groups.items():
        if k in big:
            continue
        preds = k[1]
        near = preds[0][0] if preds else None
        home = next((bk for bk in big if bk[1] and bk[1][0][0] == near), None)
        if home is None:
            out[k] = list(v)
        else:
            out[home].extend(v)
    return out
