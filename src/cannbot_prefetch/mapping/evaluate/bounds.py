"""What makes a value "not evaluable": the evaluator's exceptions and its bounded arithmetic.

Model source is untrusted input, so every value the evaluator computes passes through these
bounds; kept apart from the evaluator so the limits read in one place.
"""

from __future__ import annotations

import math
from typing import Any


class MissingKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class Unsupported(Exception):
    pass


# Bounds on what model source may make the evaluator compute (it reads untrusted files): a
# shape is far below 2**64 and a config list far below 100k items, while `2 ** 2 ** 36` or
# `"a" * 10 ** 10` would take minutes and gigabytes. Beyond them a value is "not evaluable".
MAX_INT = 2**64
MAX_LEN = 100_000
MAX_EXP_BITS = 64
# how deep plain helper functions may call helpers (functions.py): transformers' shapes use one
# level (xlstm's round_up_to_next_multiple_of); a deeper chain or a recursion is not evaluable
MAX_HELPER_DEPTH = 4
# how many statements one helper call may run (functions.py): a helper's body is straight-line
# code (no loops), so this bounds its size; vLLM 0.34's longest shape helper runs 7
# (qwen3_dflash.py `_get_dflash_fc_input_size`), transformers' run one
MAX_HELPER_STATEMENTS = 64
# the most layers a per-layer shape or condition is read for (one evaluation of the layer's
# __init__ per layer; a deeper stack is read as "not decided")
MAX_LAYERS = 512
# what an evaluation may raise on odd source: the attribute is then "not evaluable"
EVAL_ERRORS = (Unsupported, TypeError, ArithmeticError, ValueError, AttributeError, KeyError,
               IndexError, RecursionError)


def bounded(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        raise Unsupported(f"an integer of {value.bit_length()} bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise Unsupported(f"{value}")
    if isinstance(value, (str, list, tuple)) and len(value) > MAX_LEN:
        raise Unsupported(f"a sequence of {len(value)} items")
    return value


def power(a: Any, b: Any) -> Any:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if abs(a) > 1 and b > 0 and b * math.log2(abs(a)) > MAX_EXP_BITS:
            raise Unsupported(f"{a} ** {b} is too large")
    return a ** b


def times(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_LEN:
            raise Unsupported(f"a sequence of {len(seq)} x {n} items")
    return a * b


def modulo(a: Any, b: Any) -> Any:
    if isinstance(a, str):      # `"%0999999999d" % 1` formats a gigabyte; shapes never need it
        raise Unsupported("string formatting")
    return a % b


def plus(a: Any, b: Any) -> Any:
    if isinstance(a, (str, list, tuple)) and isinstance(b, (str, list, tuple)) \
            and len(a) + len(b) > MAX_LEN:
        raise Unsupported(f"a sequence of {len(a) + len(b)} items")
    return a + b
