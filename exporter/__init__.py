"""citation-drift-exporter: keeps the citations of a RAG answer system honest.

Layout, in the order data flows: ``records`` (the contract: decoding and files) -> ``checks``
(folding, the live store, relocation, the per-citation engine) -> ``outputs`` (verdicts,
reports, metrics); ``sweep`` runs an archive through them, ``service`` runs them on Kafka (and
on files, and in the demo), ``simulate`` makes realistic scenarios, and ``cli`` wires arguments
to all of it.
"""

__version__ = "0.1.0"
