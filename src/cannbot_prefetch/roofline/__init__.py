"""Stage 2: KernelTable x HardwareProfile -> per-signature roofline (OpCost, verdicts).

shapes.py parses the table's shape strings; cost.py holds every FLOP/byte formula; families.py
says which op types are MatMul-family; classify.py groups kernels and gives the verdicts;
verdict.py holds the verdict rules and which one decides (`verdict_for`).
"""

from .classify import Roofline, SignatureCost, Verdict, classify, select_top
from .cost import OpCost, op_cost

__all__ = ["OpCost", "Roofline", "SignatureCost", "Verdict", "classify", "op_cost", "select_top"]
