"""cannbot-prefetch's stand-in for vLLM's layer classes (plain torch, TP 1): see
cannbot_prefetch/verify/shims/__init__.py. Not vLLM."""
SHIM = True
