"""The grammar of every plan field that reaches source code (CONTRACTS "Plan fields are data").

A plan is shared, reviewed and committed like any other text, so nothing in it is pasted into
source or evaluated: each field the rewriter, the helper, the A/B script or `verify` uses must
match one of these shapes, and the code is then built from the parsed pieces (identifiers and
integers), never from the string. One definition, used on load (plan/validate.py, with the key path)
and again by every consumer that takes a `Site` or `Switch` built in memory. A leaf
(contract/); plan/ re-exports it as `plan.grammar`.
"""

from __future__ import annotations

import keyword
import re

from .plan import POSITIONS

# ASCII only: model code names its classes and attributes in ASCII, and Unicode identifiers
# would let two different strings normalise to one name (NFKC).
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SITE_ID = re.compile(r"[a-z0-9_.-]{1,128}\Z")
SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# tags the rewriter writes for shared lines; a site id may not take one of them
RESERVED_TAGS = ("import", "switch", "join", "next-layer")
MAX_PATH_PARTS = 32


def is_identifier(text: object) -> bool:
    return isinstance(text, str) and bool(_IDENT.match(text)) and not keyword.iskeyword(text)


def is_dotted(text: object, min_parts: int = 1) -> bool:
    """`a`, `self.mlp.gate_proj.weight`: identifiers joined by dots, nothing else."""
    if not isinstance(text, str):
        return False
    parts = text.split(".")
    return min_parts <= len(parts) <= MAX_PATH_PARTS and all(is_identifier(p) for p in parts)


_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]{1,9}|[A-Za-z_][A-Za-z0-9_]*)\]")


def access_steps(text: object, names_in_index: bool = False) -> list[str | int] | None:
    """`self.mlps[0].down_proj` -> ["self", "mlps", 0, "down_proj"]: identifiers joined by '.'
    with integer indices of module lists (`names_in_index`: `self.layers[i]` too, for anchors
    that are only matched against the source, never written into it); None otherwise."""
    if not isinstance(text, str):
        return None
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
    if m is None or not is_identifier(m.group(0)):
        return None
    steps: list[str | int] = [m.group(0)]
    pos = m.end()
    while pos < len(text):
        st = _STEP.match(text, pos)
        if st is None:
            return None
        if st.group(1) is not None:
            if not is_identifier(st.group(1)):
                return None
            steps.append(st.group(1))
        elif st.group(2).isdigit():
            steps.append(int(st.group(2)))
        elif names_in_index and is_identifier(st.group(2)):
            steps.append(st.group(2))
        else:
            return None
        pos = st.end()
    return steps if len(steps) <= MAX_PATH_PARTS else None


def is_access_path(text: object, min_parts: int = 1) -> bool:
    """`self.mlp.gate_proj.weight`, `self.mlps[0].down_proj.weight`: a dotted name whose steps
    may also index a module list by an integer."""
    steps = access_steps(text)
    return steps is not None and len(steps) >= min_parts


def is_anchor(text: object) -> bool:
    """A call as the source writes it: an access path, indices by integer or by a local name
    (`self.layers[i]`, `self.self_attn[0].forward_absorb`, `decoder_layer`)."""
    return access_steps(text, names_in_index=True) is not None


def is_site_id(text: object) -> bool:
    return isinstance(text, str) and bool(SITE_ID.match(text)) and text not in RESERVED_TAGS


def split_position(spec: str) -> tuple[str, str]:
    """A join's position (`Join.position`, the file's `join.where`) as (position, call):
    `end` -> ("end", ""); `before:self.mlp` -> ("before", "self.mlp")."""
    if spec == "end":
        return "end", ""
    position, sep, call = spec.partition(":")
    return (position, call) if sep else (spec, "")


def is_join_position(text: object) -> bool:
    if not isinstance(text, str):
        return False
    position, call = split_position(text)
    return position == "end" or (position in POSITIONS and is_anchor(call))


# field -> (check, what it must be): the fields that reach code
_DOTTED = (is_dotted, "a dotted name (identifiers joined by '.')")
_IDENT_RULE = (is_identifier, "a Python identifier")
RULES = {
    "id": (is_site_id, "lowercase letters, digits, '_', '.', '-' (not import/switch/join/"
                       "next-layer)"),
    "target.class": _IDENT_RULE,
    "target.attr": (is_access_path, "a dotted name (identifiers joined by '.', integer "
                                    "indices allowed: mlps[0].down_proj)"),
    "target.weight_expr": (lambda t: is_access_path(t, 2), "an attribute path such as "
                                                          "self.mlp.gate_proj.weight or "
                                                          "self.mlps[0].down_proj.weight"),
    "insert.class": _IDENT_RULE,
    "insert.method": _IDENT_RULE,
    "insert.anchor_call": (is_anchor, "a call as the source writes it: identifiers joined by "
                                      "'.', module-list indices allowed (self.mlps[0])"),
    "dependency.expr": (is_dotted, "a local name or an attribute path (no calls, operators, "
                                   "comments or line breaks)"),
    "guard.expr": (is_dotted, "a local name or an attribute path"),
    "join.class": _IDENT_RULE,
    "join.method": _IDENT_RULE,
    "join.where": (is_join_position, "end, before:<call> or after:<call>"),
    "switch.name": _IDENT_RULE,
    "switch.config_path": _DOTTED,
}


def problem(field: str, value: object) -> str | None:
    """None when `value` fits the grammar of `field` (a key of RULES), else what it must be."""
    check, what = RULES[field]
    return None if check(value) else f"must be {what}, not {value!r}"


MAX_ALT_PATHS = 8     # a layer class reached by more paths than this is not a layer's structure


def alt_paths_problem(weight_expr: str, alts, scope: str) -> str | None:
    """`target.alt_weight_exprs`: other paths of the same weight, each an attribute path like
    weight_expr, none repeated, all below `self.next_layer.` (next_layer scope) or below the
    same first module as weight_expr (`self.mlp.`: the insertion precedes the call that runs
    every one of them); None when they fit."""
    if len(alts) > MAX_ALT_PATHS:
        return f"names {len(alts)} paths, more than {MAX_ALT_PATHS}"
    head = "self.next_layer." if scope == "next_layer" else \
        ".".join(weight_expr.split(".")[:2]).split("[")[0] + "."
    for k, a in enumerate(alts):
        if not isinstance(a, str) or not is_access_path(a, 2):
            return f"[{k}] must be an attribute path like weight_expr, not {a!r}"
        if a == weight_expr or a in alts[:k]:
            return f"[{k}] repeats a path already named ({a})"
        if not a.startswith(head):
            return f"[{k}] must lie below {head[:-1]} like weight_expr ({scope} scope), not {a}"
    return None


def site_problems(site) -> list[tuple[str, str]]:
    """[(key path inside the site, message)] for the fields of a Site that reach source."""
    t, i, j = site.target, site.insert, site.join
    values = {"id": site.id, "target.class": t.cls, "target.attr": t.attr,
              "target.weight_expr": t.weight_expr, "insert.class": i.cls,
              "insert.method": i.method, "insert.anchor_call": i.anchor_call,
              "dependency.expr": site.dependency, "join.class": j.cls, "join.method": j.method,
              "join.where": j.position}
    out = [(k, msg) for k, v in values.items() if (msg := problem(k, v))]
    alt = alt_paths_problem(t.weight_expr, tuple(t.alt_weight_exprs), t.scope)
    if alt:
        out.append(("target.alt_weight_exprs", alt))
    if not isinstance(site.max_size, int) or isinstance(site.max_size, bool) \
            or not 0 < site.max_size <= INT64_MAX:
        out.append(("max_size", f"must be an integer in 1..{INT64_MAX}, not {site.max_size!r}"))
    mt = site.max_tokens
    if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or not 0 < mt <= INT32_MAX):
        out.append(("max_tokens", f"must be an integer in 1..{INT32_MAX}, not {mt!r}"))
    g = getattr(site, "guard", None)
    if g is not None:  # the rewriter writes guard=(expr, dim, max_len) into the call
        if msg := problem("guard.expr", g.expr):
            out.append(("guard.expr", msg))
        for key, v, lo in (("guard.dim", g.dim, -INT32_MAX), ("guard.max_len", g.max_len, 1)):
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= INT32_MAX:
                out.append((key, f"must be an integer in {lo}..{INT32_MAX}, not {v!r}"))
    return out


def switch_problems(switch) -> list[tuple[str, str]]:
    out = [(f"switch.{k}", msg) for k, v in (("name", switch.name),
                                             ("config_path", switch.config_path))
           if (msg := problem(f"switch.{k}", v))]
    if not isinstance(switch.default, bool):
        out.append(("switch.default", f"must be true or false, not {switch.default!r}"))
    return out


# torch_npu.npu_prefetch takes max_size as an int64 (the C++ op's `int` argument); the token
# guard is compared against a tensor dimension product, which a 32-bit count always covers.
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
