"""Entailment, in one place: does each quote establish the claim it is cited for?

The pure part (no I/O; the core imports it): ``results`` (what a judge decides and what follows
from it), ``lexical`` (the offline judge of numbers and negations), ``sampling`` (strata,
allocation, bottom-k keys) and ``drawing`` (a sweep's sample drawn while it checks),
``summary`` (a judged sample's counts and cost). At the edge: ``openai`` and ``labels`` (a model
judge behind an OpenAI-compatible endpoint), ``background`` (the service's judge behind the
traffic, within a budget), ``thread`` (a model judge in a thread, for the demo), ``judging``
(a sweep's sample judged, lexical first, the model within budget) and ``report`` (a judged
sample's lines and JSON).
"""
