"""Generators of GENERATED (not measured) Ascend profiling exports for the examples.

models.py (config.json -> decode-step ops), timing.py (the duration formula and counters),
writer.py (the torch_npu Level1 + PipeUtilization folder). See each module's docstring.
"""
