"""Instances of one signature -> call sites. Every instance belongs to exactly one cluster, and
linears of one shape (q/o, k/v, gate/up) are told apart by their order within the layer, never
merged or averaged together.

The layer is found on the timeline itself: per (step, stream) the sequence of op keys (the
signature for MatMul-family ops, the type for the rest) repeats once per decoder layer; its
period is the shift that keeps the longest stretch of the sequence equal to itself (ties: the
shortest). The layer boundary (phase) is placed where every MatMul signature occurs equally
often in every whole layer, as close before the first MatMul as that allows. An instance's rank
is then its order among the same signature's instances in its layer (and call-site frame, when
stacks exist): q_proj is rank 0 and o_proj rank 1 of one shape in every layer, layer 0 included;
gate_proj and up_proj of the nested HF MLP line share a frame and are ranks 0 and 1 of it.
Without a repeating pattern (one layer, or irregular layers) the whole step is taken as one
layer, and a note says so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ..profiling.stacks import Frames


def _period(codes: tuple[int, ...], is_mm: tuple[bool, ...]) -> tuple[int, int, int] | None:
    """(period, first index, length) of the longest self-repeating stretch of a code sequence,
    or None when no stretch repeats in full at least twice. A layer holds MatMuls and other ops
    (norms at least): a repeat of MatMuls alone (k_proj, v_proj back to back) is no layer."""
    best: tuple[int, int, int] | None = None      # (span, -period, start)
    for p in _candidate_periods(codes, is_mm):
        start, run = _longest_equal_run(codes, p)
        if run < p:                               # not two whole repetitions (or none)
            continue
        one = is_mm[start:start + p]
        if all(one) or not any(one):
            continue
        cand = (run + p, -p, start)
        if best is None or cand[:2] > best[:2]:
            best = cand
    return None if best is None else (-best[1], best[2], best[0])


def _longest_equal_run(codes: tuple[int, ...], p: int) -> tuple[int, int]:
    """(start, length) of the first longest stretch where codes[i] == codes[i + p]."""
    best_start = best_len = 0
    start = -1
    for i, same in enumerate(map(int.__eq__, codes, codes[p:])):
        if same:
            if start < 0:
                start = i
        elif start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    if start >= 0 and len(codes) - p - start > best_len:
        best_start, best_len = start, len(codes) - p - start
    return best_start, best_len


def _candidate_periods(codes: tuple[int, ...], is_mm: tuple[bool, ...]) -> list[int]:
    """A layer repeats its MatMuls, so its period is the distance between an instance of the
    most frequent MatMul key and one of the next few (up to 8 per layer) of the same key."""
    counts = Counter(c for c, m in zip(codes, is_mm) if m)
    if not counts:
        return []
    top = max(counts.items(), key=lambda kv: (kv[1], -kv[0]))[0]   # ties: the smallest key
    x = [i for i, c in enumerate(codes) if c == top][:72]
    n = len(codes)
    return sorted({x[i + r] - x[i] for r in range(1, 9) for i in range(len(x) - r)
                   if 0 < x[i + r] - x[i] <= n // 2})


def _phase(codes: tuple[int, ...], is_mm: tuple[bool, ...], p: int, start: int,
           end: int) -> int:
    """Layer boundary (mod p): every MatMul signature equally often in every whole layer."""
    mm = [(j, c) for j, (c, m) in enumerate(zip(codes, is_mm)) if m and start <= j < end]
    if not mm:
        return start % p
    first = mm[0][0]
    order = [(first - d) % p for d in range(p)]   # right before the first MatMul, then earlier
    best, best_score = order[0], None
    for phi in order:
        lo = start + ((phi - start) % p)          # first whole layer inside the stretch
        per_sig: dict[Any, Counter] = defaultdict(Counter)
        for j, sig in mm:
            if lo <= j < end - (end - lo) % p:
                per_sig[sig][(j - phi) // p] += 1
        score = 0
        for counts in per_sig.values():
            mode = Counter(counts.values()).most_common(1)[0][0]
            score += sum(1 for c in counts.values() if c != mode)
        if best_score is None or score < best_score:
            best, best_score = phi, score
        if score == 0:
            break
    return best


def layer_units(per) -> dict[tuple, tuple[int, int] | None]:
    """Per (step, stream) sequence: (period, phase) of its layers, or None."""
    out: dict[tuple, tuple[int, int] | None] = {}
    ids: dict[Any, int] = {}
    known: dict[tuple, tuple[int, int] | None] = {}   # steps repeat one op sequence
    for key, seq in per.items():
        if key[1] is None or not any(op.sig is not None for op in seq):
            continue
        codes = tuple(ids.setdefault(("sig", op.sig) if op.sig is not None else op.type,
                                     len(ids)) for op in seq)
        if codes not in known:
            known[codes] = _unit(codes, tuple(op.sig is not None for op in seq))
        out[key] = known[codes]
    return out


def _unit(codes: tuple[int, ...], is_mm: tuple[bool, ...]) -> tuple[int, int] | None:
    """(period, phase) of one op sequence's layers, or None. MatMul codes stand for their
    signatures one to one, so the sequence of codes decides it."""
    found = _period(codes, is_mm)
    if found is None:
        return None
    p, start, span = found
    return p, _phase(codes, is_mm, p, start, start + span)


def _cluster(per, inst, frames: Frames, units=None
             ) -> tuple[list[tuple[list[tuple[tuple, int]], int]], str]:
    """Group instances by (call-site frame: `frames.first_model`, rank within the layer),
    ordered by first seen; each group with its rank. Returns (groups, note)."""
    units = units if units is not None else layer_units(per)
    groups: dict[tuple[str, int], list] = defaultdict(list)
    seen: dict[tuple, int] = defaultdict(int)
    note = ""
    for key, j in sorted(inst, key=lambda kj: (kj[0][0] is None, str(kj[0]), kj[1])):
        seq = per[key]
        frame = frames.first_model(seq[j].stack) if seq[j].stack else ""
        pu = units.get(key)
        if pu is None:
            layer = 0
            note = ("no repeating layer pattern on the timeline: each step is taken as one "
                    "layer when telling same-shape linears apart")
        else:
            layer = (j - pu[1]) // pu[0]
        slot = (key, frame, layer)
        groups[(frame, seen[slot])].append((key, j))
        seen[slot] += 1
    first = lambda m: min(per[k][j].start for k, j in m)
    out = sorted(((m, rank) for (_f, rank), m in groups.items()), key=lambda mr: first(mr[0]))
    return out, note


def call_sites(per, sig_ids, frames: Frames) -> list[tuple[list[tuple[tuple, int]], int]]:
    """The call sites of the signatures `sig_ids` on a timeline (`find.timeline`), as
    `find_windows` numbers them with the same `frames` (its `WindowRules.frames`) (Candidate.cluster indexes this list; each with its rank in the
    layer): the report picks a plan site's instances with it."""
    want = set(sig_ids)
    inst = [(key, j) for key, seq in per.items() if key[1] is not None
            for j, op in enumerate(seq) if op.sig in want]
    return _cluster(per, inst, frames)[0] if inst else []
