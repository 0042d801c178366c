"""Stage 7a: plan x model source -> rewritten source (switch-guarded npu_prefetch calls).

- legality.py (package level, shared with mapping/): whether a placement is legal, and where.
- `engine.rewrite_source(code, sites, ...)`: pure, code in, code out (+ what was applied/refused).
- `files.prepare(...)` / `commit` / `settle`: file IO around it: hashes, backups, atomic writes, revert.
"""
