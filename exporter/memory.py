"""The cyclic garbage collector, tuned for a process that holds a large store and little else.

The chunk store is hundreds of thousands of long-lived objects, and checking allocates a few
short-lived containers per citation (the decoded JSON, the verdict). With CPython's defaults a
collection runs every 700 allocations, and every tenth of those every tenth time walks the whole
store: measured here, a third of the time spent checking citations. Nothing the exporter builds
per message forms reference cycles, so it is freed by reference counting anyway; collections
only need to run rarely, and never over the store.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_long_lived", "tune_collector"]

# Allocations between young-generation collections (CPython's default: 700).
_YOUNG_THRESHOLD = 20_000


def tune_collector() -> None:
    """Collect less often: once per ``_YOUNG_THRESHOLD`` allocations, older generations as usual."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_YOUNG_THRESHOLD, middle, old)


def freeze_long_lived() -> None:
    """Move every object alive now (the loaded store) out of the collector's sight.

    Call once the store is loaded: frozen objects are still freed when their last reference
    goes, they are only never walked again. Before a fork it also spares the workers' copies of
    the store the writes a collection would make to them.
    """
    gc.collect()
    gc.freeze()
