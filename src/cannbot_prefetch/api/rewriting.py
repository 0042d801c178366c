"""`apply` / `revert` / `check` as values: the rewritten files in memory, one typed outcome per
file (rewrite.changes.FileResult: changed | unchanged | skipped | failed, with its diff), so one
bad file never hides the others. Nothing is written until `Rewrite.write()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import pipeline
from ..status import Status

if TYPE_CHECKING:      # the type only: rewrite/ loads libcst, not wanted at `--help`
    from ..rewrite.changes import Changes


@dataclass
class Rewrite:
    """What applying (or reverting) a plan changes, file by file."""

    changes: Changes
    check: bool = False           # made by check(): pending changes are a failed check
    allow_installed: bool = False

    @property
    def plan(self):
        return self.changes.plan

    @property
    def files(self) -> list:
        """One FileResult per file (model files, the helper module, the config)."""
        return self.changes.files

    @property
    def pending(self) -> bool:
        """Changes computed and not written (yet)."""
        return self.changes.pending and not self.changes.written

    @property
    def written(self) -> bool:
        return self.changes.written

    @property
    def warnings(self) -> list[str]:
        return self.changes.warnings

    @property
    def applied(self) -> list[str]:
        return self.changes.applied

    @property
    def refused(self) -> list:
        """Sites the source does not allow (site, reason)."""
        return self.changes.refused

    @property
    def refused_sites(self) -> list:
        """Planned sites apply refuses (not for a revert, which only takes lines out)."""
        return [] if self.changes.revert else self.changes.refused

    @property
    def status(self) -> Status:
        """CHECK_FAILED for pending changes under check(), and for a planned site the source
        refuses (the others are still applied): the CLI exits 1 for both."""
        if (self.check and self.pending) or self.refused_sites:
            return Status.CHECK_FAILED
        return Status.OK

    def diff(self) -> str:
        """The unified diff of every changed file."""
        return "".join(f.diff for f in self.files)

    def ensure_writable(self) -> None:
        """InputError (nothing written) for a changed file of an installed package, unless
        allowed, or one that cannot be written."""
        pipeline.check_writable(self.changes, self.allow_installed)

    def write(self) -> list[str]:
        """Write the pending changes (backups first, all or nothing). With nothing pending,
        tidy what a killed run left (temp files, the plan's status); returns what that did."""
        from ..rewrite.write import commit, settle

        self.ensure_writable()
        if self.changes.pending:
            commit(self.changes)
            return []
        return settle(self.changes)

    def to_json(self) -> dict:
        """The `apply --json` document: `pending` = changes not written yet, `written` = this
        run wrote them; the helper module is summarised, not shown as a 100-line diff."""
        changes = self.changes
        doc = changes.to_json()
        doc["written"] = bool(changes.written)
        doc["pending"] = self.pending
        if self.pending:        # nothing written: the files' status is still the one before
            doc["status"] = "applied" if changes.revert else "proposed"
        doc["changed_files"] = [f.path for f in changes.files if f.status == "changed"]
        for fj, f in zip(doc["files"], changes.files):
            if f.kind == "helper" and f.status == "changed":
                fj["diff"] = ""
                fj["helper"] = f.helper_summary()
        return doc


def _rewrite(plan, *, revert: bool, check: bool, helper, root, allow_installed: bool,
             lang: str) -> Rewrite:
    changes = pipeline.rewrite(plan, revert=revert, helper=helper, root=root,
                               allow_installed=allow_installed, lang=lang)
    return Rewrite(changes, check=check, allow_installed=allow_installed)


def apply(plan, *, helper=None, root=None, allow_installed: bool = False,
          lang: str = "en") -> Rewrite:
    """The plan's sites inserted into its model files, in memory. `helper`: where the helper
    module goes (default: beside the first model file); `root`: the project root the plan's
    files must lie under (default: the git work tree holding the current folder, else the
    current folder)."""
    return _rewrite(plan, revert=False, check=False, helper=helper, root=root,
                    allow_installed=allow_installed, lang=lang)


def revert(plan, *, helper=None, root=None, allow_installed: bool = False,
           lang: str = "en") -> Rewrite:
    """What apply inserted, taken out again (by its markers, so later user edits survive)."""
    return _rewrite(plan, revert=True, check=False, helper=helper, root=root,
                    allow_installed=allow_installed, lang=lang)


def check(plan, *, revert: bool = False, helper=None, root=None, allow_installed: bool = False,
          lang: str = "en") -> Rewrite:
    """apply (or revert) as a check: status CHECK_FAILED while changes are pending."""
    return _rewrite(plan, revert=revert, check=True, helper=helper, root=root,
                    allow_installed=allow_installed, lang=lang)
