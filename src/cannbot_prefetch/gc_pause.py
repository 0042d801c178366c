"""`gc_paused()`: the cyclic garbage collector off while a stage builds many small objects.

Reading a large trace or laying out a long timeline builds 10^5 acyclic objects (events, spans,
ops), freed by reference counting alone; meanwhile the collector would rescan everything alive
again and again as the heap grows, a fifth to a quarter of the stage's time."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
