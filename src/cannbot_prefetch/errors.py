"""One small exception family. The CLI prints `str(err)` as one line and exits with `exit_code`.

Every error names the file (and row or site) it is about, so a user can act without a traceback.
"""

from __future__ import annotations


class CannbotError(Exception):
    """Base: unusable input or a failed step. `hint` says what to do about it."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None, path: str | None = None):
        self.message = message
        self.hint = hint
        self.path = path
        super().__init__(message)

    @property
    def status(self):
        """The `Status` a result would carry for this failure (its value is the exit code)."""
        from .status import Status

        return Status(self.exit_code)

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(CannbotError):
    """Input that cannot be used at all: missing, empty, wrong format. Exit 2, nothing written."""


class PlanError(InputError):
    """A plan file that does not validate against the contract."""


class SourceError(InputError):
    """Model source that does not parse or lacks a class/attribute the plan names."""


class Conflict(CannbotError):
    """Another apply got there first: a file carries another plan's sites, or changed while this
    run prepared its edit. Nothing written; exit 1 (like a check that did not pass)."""

    exit_code = 1


class ReportMismatch(CannbotError):
    """The report was written, but with a mismatch banner. Exit 3."""

    exit_code = 3
