"""Verify a rewritten model: switch off/on outputs, recorded prefetch calls, graph order.

torch is imported only inside this package's functions (an optional extra for users); the real
`torch_npu` is used when importable, otherwise a recording stub lives in this process only.
"""
