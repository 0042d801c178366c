"""Reading a captured FX graph: which nodes are prefetches, and whether one is in order.

Shared by the per-layer make_fx check (`checks.graph_order`) and the torch.compile checks
(`capture.py`), so "after its dependency, before its target" has one definition. Works on any FX
graph: dynamo's (torch-level calls), AOT's and make_fx's (aten ops).
"""

from __future__ import annotations

from ..rewrite.helper import JOIN_OP, PREFETCH_OPS

# ops that only re-view or pick from a weight (the target's matmul is found through them)
VIEWS = {"t", "view", "transpose", "permute", "reshape", "_unsafe_view", "expand", "select",
         "slice", "unsqueeze", "contiguous", "detach", "alias", "numpy_T", "chunk", "split",
         "index", "index_select", "gather", "_to_copy", "clone", "squeeze", "split_with_sizes",
         "getitem", "to"}
# ops whose output is a view of their first input: no compute, so a view is ready exactly when
# the tensor it views is. AOT's functionalization spells each read of a tensor updated in place
# through a view as its own chain of these from the update's result (`slice_scatter`), so two
# reads of one tensor become sibling chains (`flows_into`).
ALIASES = {"view", "_unsafe_view", "permute", "transpose", "t", "numpy_T", "select", "slice",
           "expand", "unsqueeze", "squeeze", "alias", "as_strided", "diagonal", "unfold",
           "detach", "view_as", "expand_as"}
MATMULS = {"mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "_grouped_mm", "grouped_mm",
           "addbmm", "einsum"}


def op_name(node) -> str:
    """`npu::npu_prefetch` for an op (OpOverload or, in dynamo's graphs, OpOverloadPacket)
    target, else the callable's name."""
    target = node.target
    name = getattr(getattr(target, "_schema", None), "name", None) or \
        getattr(target, "_qualified_op_name", None)
    if name:
        return name
    return getattr(target, "__name__", str(target))


def is_prefetch(node) -> bool:
    return node.op == "call_function" and op_name(node) in PREFETCH_OPS


def is_join(node) -> bool:
    return node.op == "call_function" and op_name(node) == JOIN_OP


def _short(node) -> str:
    return op_name(node).split("::")[-1].split(".")[0]


def first_real_user(node, skip, index, after: int = -1):
    """The first node after position `after` that computes with `node` (through views), other
    than `skip`: the first such matmul if any, else the first other user. A view made before
    `after` is followed too (a transposed weight read again in a later step)."""
    best = fallback = None
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        for u in n.users:
            if u is skip or u in seen or is_prefetch(u):
                continue
            seen.add(u)
            name = _short(u)
            if name in VIEWS:
                todo.append(u)
            elif index[u] <= after:
                continue
            elif name in MATMULS:
                if best is None or index[u] < index[best]:
                    best = u
            elif fallback is None or index[u] < index[fallback]:
                fallback = u
    return best or fallback


def ancestors(node) -> set:
    out, todo = set(), [node]
    while todo:
        n = todo.pop()
        for a in n.all_input_nodes:
            if a not in out:
                out.add(a)
                todo.append(a)
    return out


def viewed(node):
    """The node that computed the data `node` views: up its first input through `ALIASES`
    (the node itself when it computes)."""
    while node.op in ("call_function", "call_method") and _short(node) in ALIASES \
            and node.args and hasattr(node.args[0], "op"):
        node = node.args[0]
    return node


def flows_into(dep, node) -> bool:
    """`dep`, or the node that computed what it views (`viewed`), is an ancestor of `node`.
    Read through views only: a dependency computed from the target's input (not a view of it)
    is not what the target reads."""
    before = ancestors(node)
    return dep in before or viewed(dep) in before


def order_problem(node, nodes, index, label: str, next_layer: bool) -> str | None:
    """None when prefetch `node` comes after its dependency and before the next op that computes
    with its weight, and the dependency flows into that op (`flows_into`: an ancestor, or a
    view of one); else what is wrong. The next
    op, not the first: a layer run twice in one graph (a recurrent model, unrolled) reads its
    weight again after its second prefetch (verify/runs.py). A prefetch with no read after it,
    the target having run before it, is out of order. A weight no op in this graph reads (the
    next layer's, in a one-layer capture) is checked against the graph's output instead."""
    weight, dep = node.args[0], node.args[1]
    if dep is None:
        return f"{label}: no dependency node"
    if index[dep] >= index[node]:
        return f"{label}: prefetch before its dependency"
    user = first_real_user(weight, node, index, after=index[node])
    if user is None:
        earlier = first_real_user(weight, node, index)
        if earlier is not None:
            return f"{label}: the target ({_short(earlier)}) runs before the prefetch"
        if not next_layer:
            return f"{label}: nothing reads the weight after the prefetch"
        outputs = [x for x in nodes if x.op == "output"]
        if not outputs or not flows_into(dep, outputs[0]):
            return f"{label}: the dependency does not flow into the layer's output"
        return None
    if not flows_into(dep, user):
        return f"{label}: the dependency does not flow into the target ({_short(user)})"
    return None
