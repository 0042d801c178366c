"""The plan: schema.py (the `prefetch_plan.yaml` contract's values, defined in the leaf
contract/plan.py, and their plain-data form), validate.py (plain data ->
Plan, every field checked), store.py (YAML files, atomic writes), build.py (windows + mapping +
sizing -> Plan; its steps in options.py, size.py, sites.py, manual.py, design_inputs.py) and
design.py (the design document).

Only the schema (the leaf contract/plan.py's values, schema.py's plain-data form) is re-exported here: every stage reads plans, while build.py imports the
upstream stages and must not be pulled in by them (`from cannbot_prefetch.plan.build import ...`).
"""

from __future__ import annotations

from ..atomic import write_atomic
from ..contract import grammar   # the field grammar (contract/grammar.py), where callers found it
from ..contract.plan import (
    MAPPINGS,
    CALL_FORMS,
    MODES,
    call_form,
    PLAN_VERSION,
    POSITIONS,
    SCOPES,
    STATUSES,
    Basis,
    Cap,
    Guard,
    Insert,
    Join,
    Plan,
    Saving,
    Site,
    Switch,
    Target,
)
from .schema import plan_to_dict, sha256_file
from .store import dump_plan, load_plan, resolve_source, save_plan
from .validate import plan_from_dict

__all__ = ["CALL_FORMS", "MAPPINGS", "MODES", "call_form", "PLAN_VERSION", "POSITIONS", "SCOPES", "STATUSES", "Basis", "Cap",
           "Guard", "Insert", "Join", "Plan", "Saving", "Site", "Switch", "Target", "dump_plan", "grammar", "load_plan",
           "plan_from_dict", "plan_to_dict", "resolve_source", "save_plan", "sha256_file",
           "write_atomic"]
