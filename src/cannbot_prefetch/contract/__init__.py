"""The plan contract as a leaf: its value types (`plan.py`: Insert, Join, Site, Target, Basis,
Cap, Saving, Guard, Switch, Plan and the mode / call-form names) and the grammar of every plan
field that reaches source code (`grammar.py`).

Why a leaf: mapping, sizing, gain and legality build toward these values, and must not pull in
plan/ (the builder that imports them, validation and the YAML layer) to do so. Nothing here
imports a stage; plan/ re-exports both for the callers that found them there.
"""
