"""Stage 7a: plan x model source -> rewritten source (switch-guarded npu_prefetch calls).

- legality/ (package level, shared with mapping/): whether a placement is legal, and where.
- `engine.rewrite_source(code, sites, ...)`: pure, code in, code out (+ what was applied/refused);
  `engine.check_site`: every per-site check apply makes (analyze asks it too).
- concerns.py: the lines each concern writes (site call, switch, join, next-layer link, import).
- markers.py: the tool's own lines, recognised and stripped (idempotence, revert).
- `files.prepare(...)`: file IO around it, in memory: hashes, project root, one plan per file,
  revert (-> changes.Changes); `write.commit` / `write.settle`: backups, lock, atomic writes.
"""
