"""``citation-exporter demo``: the streaming pipeline on built-in traffic, no Kafka needed.

An edge of its own, not the core: it paces simulated traffic, draws the terminal view from the
outputs' summary and shift clusters, and runs a model judge behind the traffic.
"""
