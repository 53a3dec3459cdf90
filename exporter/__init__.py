"""citation-drift-exporter: keeps the citations of a RAG answer system honest.

Layout, in the order data flows: ``records`` (the contract: decoding and files) -> ``checks``
(folding, the live store, relocation, the per-citation engine) -> ``outputs`` (verdicts and
reports); ``sweep`` runs an archive through them, ``simulate`` makes realistic scenarios, and
``cli`` wires arguments to all of it.
"""

__version__ = "0.1.0"
