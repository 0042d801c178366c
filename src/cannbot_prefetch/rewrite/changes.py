"""What `apply` would do, as data: one `FileResult` per file (status, sites applied and
refused, old and new text, diff) and the `Changes` of a whole plan; built by files.prepare,
written by write.commit, shown by the CLI and the API."""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..plan import Plan
from .engine import ExistingCall, Refusal


@dataclass
class FileResult:
    """One file's outcome. status: changed | unchanged | skipped | failed."""

    path: str                           # as the plan names it (a symlink stays a symlink)
    status: str
    kind: str = "model"                 # model | helper | config
    applied: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    existing: list[ExistingCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    message: str = ""
    old: str | None = None              # None: the file does not exist yet
    new: str | None = None              # None: the file is to be removed
    real: str = ""                      # the file written (a symlink's target); "" = path
    stale: list[str] = field(default_factory=list)   # temp files a killed run left

    @property
    def write_path(self) -> Path:
        return Path(self.real or self.path)

    @property
    def diff(self) -> str:
        if self.status != "changed":
            return ""
        name = Path(self.path).name
        return "".join(difflib.unified_diff(
            (self.old or "").splitlines(keepends=True), (self.new or "").splitlines(keepends=True),
            fromfile=f"a/{name}", tofile=f"b/{name}"))

    def to_json(self) -> dict:
        return {"path": self.path, "kind": self.kind, "status": self.status,
                "applied": self.applied,
                "refused": [{"site": r.site, "reason": r.reason} for r in self.refused],
                "existing_npu_prefetch": [{"line": e.line, "where": e.where, "code": e.code}
                                          for e in self.existing],
                "notes": self.notes, "message": self.message, "diff": self.diff}

    def helper_summary(self) -> dict:
        """The helper module as `apply --json` shows it: what happens to it, its length and
        hash, instead of a 100-line diff."""
        new = self.new or ""
        return {"action": "remove" if self.new is None else "write" if self.old is None
                else "update",
                "lines": len(new.splitlines()),
                "sha256": hashlib.sha256(new.encode("utf-8")).hexdigest()
                if self.new is not None else None}


@dataclass
class Changes:
    plan_path: Path
    plan: Plan
    revert: bool
    files: list[FileResult]
    warnings: list[str] = field(default_factory=list)
    written: bool = False
    backups: list[str] = field(default_factory=list)
    root: str = ""
    status_after: str = "proposed"      # the plan status the files have after this run

    @property
    def pending(self) -> bool:
        return any(f.status == "changed" for f in self.files)

    @property
    def applied(self) -> list[str]:
        return [s for f in self.files for s in f.applied]

    @property
    def refused(self) -> list[Refusal]:
        return [r for f in self.files for r in f.refused]

    def to_json(self) -> dict:
        return {"plan": str(self.plan_path), "mode": self.plan.mode, "revert": self.revert,
                "pending": self.pending, "written": self.written, "root": self.root,
                "status": self.status_after,
                "applied": self.applied,
                "refused": [{"site": r.site, "reason": r.reason} for r in self.refused],
                "warnings": self.warnings, "backups": self.backups,
                "files": [f.to_json() for f in self.files]}
