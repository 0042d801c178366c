"""Which control-flow paths of one method reach each statement (issue 32).

A prefetch does its work only on a path that runs both it and its target: a line in one
branch of `if self.is_attention:` never runs in a layer that takes the other. Each statement
gets the arms it lies in, outermost first: the body of an `if` (arm 0), of its `elif`s (1, 2,
...) or its `else` (-1). The statements after an `if` chain with no `else` whose every arm
leaves the block (`return`, `raise`, `continue`, `break`) lie in that chain's implicit `else`
(dory's `if self.is_attention: ...; return ...` then the MLP path; zaya's `if not
self.is_sequence_parallel: return ...` then the sequence-parallel path). A loop body is an arm
of its own (it may run no time), so it dominates nothing after the loop; `try`, `with` bodies
run as the code around them.

- `exclusive(m, i, j)`: no run of the method takes both statements (two arms of one chain);
- `dominates(m, i, j)`: statement i runs on every path that reaches statement j;
- `on_every_exit(m, i)`: statement i runs on every path to the method's end (a line after it
  runs before every return);
- `conditions(m, i)`: the branch tests that hold at statement i, as (test text, value).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .view import Method

_LEAVES = (cst.Return, cst.Raise, cst.Continue, cst.Break)


@dataclass(frozen=True)
class Arm:
    chain: int                           # the chain's first `if` (or the loop) statement index
    arm: int                             # 0 `if`, 1.. `elif`, -1 `else` (explicit or implicit)
    tests: tuple[tuple[str, bool], ...]  # what holds in this arm: (test text, value)
    line: int                            # the chain's first line (for a reason to name it)


def _test(node: cst.BaseExpression, value: bool) -> tuple[str, bool]:
    """(text, value) with `not X` read as X with the other value."""
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node, value = node.expression, not value
    return cst.Module([]).code_for_node(node.with_changes(lpar=[], rpar=[])
                                         if hasattr(node, "lpar") else node), value


def _leaves(block) -> bool:
    """The block never falls through to the statement after it."""
    body = list(getattr(block, "body", []))
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, _LEAVES) for s in last.body)
    if isinstance(last, cst.If):
        arms, node = [], last
        while isinstance(node, cst.If):
            arms.append(node.body)
            node = node.orelse
        if node is None:
            return False
        arms.append(node.body)
        return all(_leaves(b) for b in arms)
    return False


def arms(m: Method) -> list[tuple[Arm, ...]]:
    """The arms each statement of `m.stmts` lies in, outermost first (() at the method's top)."""
    index = {id(s.node): k for k, s in enumerate(m.stmts)}
    out: list[tuple[Arm, ...]] = [()] * len(m.stmts)

    def block(stmts, path: tuple[Arm, ...]) -> None:
        for node in stmts:
            k = index.get(id(node))
            if k is not None:
                out[k] = path
            if isinstance(node, cst.If):
                path = chain(node, k if k is not None else -1, path)
            elif isinstance(node, (cst.For, cst.While)):
                loop = Arm(k if k is not None else -1, 0, (), m.stmts[k].start if k is not None else 0)
                block(node.body.body, path + (loop,))
                if node.orelse is not None:
                    block(node.orelse.body.body, path)
            elif isinstance(node, cst.Try):
                block(node.body.body, path)
                for h, handler in enumerate(node.handlers):
                    block(handler.body.body, path + (Arm(k if k is not None else -1, h + 1, (),
                                                         0),))
                for extra in (node.orelse, node.finalbody):
                    if extra is not None:
                        block(extra.body.body, path)
            elif isinstance(node, cst.With):
                block(node.body.body, path)

    def chain(node: cst.If, k: int, path: tuple[Arm, ...]) -> tuple[Arm, ...]:
        """Walk an if/elif/else chain; the path of the statements after it."""
        line = m.stmts[k].start if k >= 0 else 0
        held: tuple[tuple[str, bool], ...] = ()
        branch, n, leaves = node, 0, True
        while isinstance(branch, cst.If):
            t = _test(branch.test, True)
            block(branch.body.body, path + (Arm(k, n, held + (t,), line),))
            leaves = leaves and _leaves(branch.body)
            held += ((t[0], not t[1]),)
            branch, n = branch.orelse, n + 1
        if branch is not None:
            block(branch.body.body, path + (Arm(k, -1, held, line),))
            return path
        return path + (Arm(k, -1, held, line),) if leaves else path

    block(m.node.body.body if isinstance(m.node.body, cst.IndentedBlock) else [], ())
    return out


def parting(a, b) -> int:
    """The index of the first place two sequences (arm paths, call chains) differ; the shorter
    one's length when one extends the other."""
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def exclusive(m: Method, i: int, j: int, got: list | None = None) -> Arm | None:
    """The chain whose two arms hold statements i and j (no run takes both), else None."""
    got = got if got is not None else arms(m)
    for a, b in zip(got[i], got[j]):
        if a == b:
            continue
        return a if a.chain == b.chain and a.arm != b.arm else None
    return None


def dominates(m: Method, i: int, j: int, got: list | None = None) -> bool:
    """Statement i runs on every path that reaches statement j (i comes first, and every arm
    it lies in holds j too)."""
    got = got if got is not None else arms(m)
    return i <= j and got[j][:len(got[i])] == got[i]


def on_every_exit(m: Method, i: int, got: list | None = None) -> bool:
    """Statement i runs before every way out of the method (it lies in no arm)."""
    got = got if got is not None else arms(m)
    return not got[i]


def conditions(m: Method, i: int, got: list | None = None) -> tuple[tuple[str, bool], ...]:
    """The branch tests that hold at statement i."""
    got = got if got is not None else arms(m)
    return tuple(t for a in got[i] for t in a.tests)


def branch_test(node: cst.BaseExpression, value: bool = True) -> tuple[str, bool]:
    """A branch test as `conditions` spells it (for a test read elsewhere: `__init__`)."""
    return _test(node, value)
