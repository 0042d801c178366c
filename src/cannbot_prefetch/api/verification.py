"""`verify` as a value: the switch off/on, graph-order and torch.compile checks of a plan's
rewritten model, with a status; verify.json is written only by `Verification.save()`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import pipeline
from ..status import Status

if TYPE_CHECKING:      # the type only: verify/ is loaded when a check runs
    from ..verify.runner import VerifyResult


@dataclass(frozen=True)
class Verification:
    result: VerifyResult

    @property
    def checks(self) -> list:
        """verify.checks.Check: name, site, passed, skipped, detail."""
        return self.result.checks

    @property
    def stub(self) -> bool:
        """torch_npu was this process's recording stub (no NPU), not the real one."""
        return self.result.stub

    @property
    def passed(self) -> bool:
        """Some check ran and none failed (skipped checks do not fail)."""
        return self.result.passed

    @property
    def status(self) -> Status:
        return Status.OK if self.passed else Status.CHECK_FAILED

    def to_json(self) -> dict:
        return self.result.to_json()

    def save(self, path) -> str:
        """Write verify.json (what `report --verify-result` reads)."""
        from ..atomic import write_atomic

        write_atomic(path, json.dumps(self.to_json(), indent=2) + "\n")
        return str(path)


def verify(plan, factory: str | None = None, *, model_config=None,
           progress=None, root=None) -> Verification:
    """Run the checks on the model `factory` (MODULE:FUNC returning (model, inputs)) builds from
    the rewritten source, or without one on a tiny random model of the plan's
    transformers-style file from `model_config` (default: config.json beside it or the plan).
    Needs torch; torch_npu is stubbed in this process when absent. The built-in factory imports
    only a model file under the project `root` (default as apply's: the git work tree holding
    the plan, else its folder)."""
    if progress is not None:
        progress("progress.verify_run", factory=factory or "built-in")
    return Verification(pipeline.verify(plan, factory, model_config=model_config, root=root))
