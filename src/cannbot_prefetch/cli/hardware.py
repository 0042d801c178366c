"""`cannbot prefetch hardware` (being built)."""
