"""Manual mode (`--target CLASS.ATTR`, `--window`): each named target placed with apply's
checks, sized with the profile's window where its shape matches a signature, or rejected with
the mapping's reason (all rejected: the first reason is an error, exit 2)."""

from __future__ import annotations

from typing import Any

from .. import reasons
from ..errors import InputError, SourceError
from ..mapping import Mapped, Mapper
from ..mapping.guard import guard_for
from ..mapping.manual import (Unplaceable, held_calls, overlapped, parse_target,
                              place_manual)
from ..mapping.place import with_other_paths
from ..mapping.repeats import runs_note
from ..mapping.shape import role_of
from ..mapping.source import ModelSource
from ..windows import Candidate, Rejection, find_windows
from .options import PlanOptions
from .size import element_bytes, hbm_bps, size_mapped


def manual_views(ms: ModelSource, mapper: Mapper, roofline, hw, opts: PlanOptions, cfg, notes):
    """Each --target planned, or rejected with apply's / the mapping's reason (all of them
    rejected: the first reason is an error, exit 2)."""
    out = []
    rejected: list[tuple[Unplaceable, str]] = []
    windows_by_attr: dict[str, Candidate] = {}
    if roofline is not None:
        notes.append("manual mode with a profile: windows measured where the target's shape "
                     "matches a signature")
        res = find_windows(roofline.table, [s for s in roofline.signatures
                                            if s.verdict == "memory-bound"],
                           lookback=opts.lookback, all_signatures=roofline.signatures,
                           hbm_bps=hbm_bps(hw))
        for c in res.candidates:
            got = mapper.find_target(c)
            if not isinstance(got, str):
                e = mapper.events[got[0]]
                windows_by_attr.setdefault(f"{e.owner}.{e.attr}", c)
    windows = _manual_windows(opts)
    for text, window in zip(opts.targets, windows):
        try:
            t = parse_target(text, ms, mapper.roots, mapper.events_of)
            pl = place_manual(ms, t, window, mapper.accept)
        except Unplaceable as exc:
            rejected.append((exc, text))
            continue
        b = element_bytes(opts, cfg, None, t.lin)
        role = role_of(t.attr, t.lin, "", b)
        cand = windows_by_attr.get(t.lin.qualname)
        sig = _signature_of(roofline, t.lin) if roofline is not None and cand is None else None
        m_notes = [pl.note] if pl.note else []
        m_notes += branch_notes(ms, (t.lin.cls, pl.insert.cls))
        again = runs_note(list(t.events), t.t_idx, ms)
        if again:
            m_notes.append(again)
        held = held_calls(ms, list(t.events), pl, t.t_idx)
        names = list(dict.fromkeys(_call_name(e) for e in held))   # if/else branches once
        if names:
            m_notes.append("the window holds: " + ", ".join(names[:8])
                           + (f" (+{len(names) - 8} more)" if len(names) > 8 else ""))
        else:
            why = (f"warning: {text}: the window holds no op (the prefetch and the MatMul start "
                   f"together, nothing is hidden); give --window a call that runs earlier")
            m_notes.append(why)
            notes.append(why)
        heavy = overlapped(ms, list(t.events), pl, t.t_idx)
        if heavy:
            names = ", ".join(f"{e.owner}.{e.attr}" for e in heavy[:6])
            m_notes.append(f"risk: the prefetch starts before {names} ({len(heavy)} MatMul call(s) "
                           f"before the target): it overlaps them and shares their HBM traffic"
                           + ("" if cand else "; without a profile their cost is unknown"))
        g, gwhy = guard_for(ms, pl, mapper.events)
        pl = with_other_paths(ms, pl, t.lin)
        m = Mapped(t.lin, pl, "manual", role, window or "", tuple(m_notes), signature=sig,
                   guard=g, guard_why=gwhy)
        out.append((cand, m, size_mapped(m, cand, hw, opts, 1, cfg)))
    if rejected and not out:
        exc = rejected[0][0]
        raise (InputError if exc.code == "shape_unknown" else SourceError)(
            str(exc), path=(ms.config_path or None) if exc.code == "shape_unknown"
            else ", ".join(sorted(ms.primary)))
    rej = [Rejection(text, reasons.SHAPE_UNKNOWN if exc.code == "shape_unknown"
                     else reasons.UNMAPPED, str(exc), site=text) for exc, text in rejected]
    return out, rej


def _call_name(e) -> str:
    """`Qwen2MLP.act_fn` for a module call, the function's name for a function call."""
    if e.owner and e.attr:
        return f"{e.owner}.{e.attr}"
    return e.attr or e.leaf.call or "a function"


def branch_notes(ms: ModelSource, classes) -> list[str]:
    """A note per class the site uses that a module-level `if`/`try` branch defines (xlstm's
    `else:` of `if is_xlstm_available():`): its prefetch runs only when that branch is the one
    Python took when the file was imported, which depends on the environment."""
    out = []
    for cls in dict.fromkeys(classes):
        f = ms.classes.get(cls, ("", None))[0]
        where = ms.files[f].nested_classes.get(cls) if f in ms.files else None
        if where is not None:
            out.append(f"{cls} is defined inside a module-level `{where[1]}` block (line "
                       f"{where[0]}): the prefetch runs only where that branch is the one taken "
                       f"when the file is imported")
    return out


def _manual_windows(opts: PlanOptions) -> list[str | None]:
    """--window once for every --target, or once per --target in the same order."""
    w = opts.window
    n = len(opts.targets)
    if w is None or isinstance(w, str):
        return [w] * n
    if len(w) == 1:
        return list(w) * n
    if len(w) != n:
        raise InputError(f"--window is given {len(w)} times for {n} --target(s): give it once for "
                         f"all, or once per --target in the same order")
    return list(w)


def _signature_of(roofline, lin) -> dict[str, Any] | None:
    """The profile's MatMul-family signature whose weight shape is the manual target's (the one
    with the most time when several match), whatever its verdict; None when none matches."""
    from ..mapping.shape import dims_match
    hits = [s for s in roofline.signatures if s.n and s.k and dims_match(lin, s.n, s.k, s.family)]
    if not hits:
        return None
    best = max(hits, key=lambda s: s.total_us or 0.0)
    return {"type": best.type, "input_shapes": best.input_shapes, "dtypes": best.dtypes}
