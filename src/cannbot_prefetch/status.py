"""What a result says about a run, and the exit code the CLI gives it (CONTRACTS.md "Commands").

Every result of the library (api.py) carries one; the CLI only maps it to the process exit
code, as Fixit's CLI maps its results. The values are the exit codes.
"""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    OK = 0
    CHECK_FAILED = 1      # apply --check with pending changes, verify with a failure
    UNUSABLE_INPUT = 2    # raised as InputError (nothing written); CannbotError.status says so
    MISMATCH = 3          # report written with a mismatch banner

    @property
    def exit_code(self) -> int:
        return int(self)
