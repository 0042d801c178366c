"""One spelling per printed quantity (issue 34 part 3): fmt.py, and no private copy elsewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import cannbot_prefetch as cp
from cannbot_prefetch import fmt

SRC = Path(cp.__file__).resolve().parent


def test_values_worked_by_hand():
    # 13,107,200 B = 12.5 x 1,048,576 B
    assert fmt.mib(13_107_200) == "12.50 MiB"
    assert fmt.mib_number(13_107_200) == "12.50"
    assert fmt.size_text(13_107_200) == "12.50 MiB (13,107,200 B)"
    # 2 GiB = 2,048 MiB: thousands separated, as the byte count is
    assert fmt.mib(2 << 30) == "2,048.00 MiB"
    assert fmt.number(1234.56) == "1,234.6" and fmt.number(1234.56, 2) == "1,234.56"
    assert fmt.number(7) == "7" and fmt.number("x") == "x"
    for f in (fmt.mib, fmt.mib_number, fmt.size_text, fmt.number):
        assert f(None) == "–"


def test_no_module_keeps_its_own_size_or_number_helper():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "fmt.py":
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                assert node.name not in ("_mib", "_fmt"), f"{rel}: def {node.name}"
        # a byte count divided into MiB inside an f-string: fmt.mib says it
        assert not re.search(r"/ (2 ?\*\* ?20|\(1 << 20\))[^}]*\}\s*MiB", text), rel
