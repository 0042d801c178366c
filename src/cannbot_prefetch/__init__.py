"""cannbot-prefetch: profile-driven weight prefetch for Ascend NPU inference.

Data flows one way: profile -> KernelTable -> roofline -> windows -> mapping -> sizing
-> plan -> rewrite / report. `pipeline.py` calls the stages in that order.
"""

__version__ = "0.1.0"
