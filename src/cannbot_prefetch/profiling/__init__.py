"""Stage 1: a profiling export (any layout, any version) -> one normalized KernelTable.

Entry point: `load.load_profile(path, rank=, run=, step=, steps=, include_warmup=, counters=)`.
  discover.py     which files a path means (ranks, msprof runs, slices, old/new layouts)
  columns.py      the one header-alias table, counter names, counter-group fingerprints
  cells.py        vectorized cell cleanup (quotes, N/A, DT_/FORMAT_) and the one timestamp
                  rule of every reader (decimal µs text -> ns)
  scalars.py      one JSON id and the limits every reader applies
  csv_reader.py   kernel_details / op_summary (one lazy polars pass); csv_columns.py how
                  each column is planned and cast; csv_ragged.py for files whose rows do
                  not match the header
  db_reader.py    torch_npu DB export (sqlite, read-only)
  json_stream.py  a trace's event list one event at a time (bounded memory, gzip, BOM)
  trace_decode.py / trace_events.py / trace_values.py   a Chrome trace decoded, kept as columns
  trace_reader.py / trace_launch.py / torch_trace.py   rows (and kernel_details' stacks) from
                  Ascend traces, what launched each kernel, rows from PyTorch traces
  limits.py       input size bounds (policy.yaml `profiling:`), checked before parsing
  stacks.py       stacks for kernel_details rows from the trace_view beside them
  metadata.py     profiler_info / info.json: level, counter group, rank, cores, clock
  steps.py        step selection, warm-up exclusion
  companions.py   where step_trace_time.csv, l2_cache.csv and trace_view.json are; the
                  first two read for the report stage
  table.py        the normalized schema (KernelTable, ProfileInfo, Profile)
Rows come in source order for CSV exports and in start order for DB and trace exports.
"""
