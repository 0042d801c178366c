"""Stage 1: a profiling export (any layout, any version) -> one normalized KernelTable."""
