"""Formal descriptions of a network's execution, for the stages that check or write them (docs/nnef.md).

``nnef_items`` reads, writes and splits multi-item NNEF descriptions (one
description per item, with the paper's ``send_var``/``get_var``) and checks
that the items compose to the whole; ``petri`` gives a description, or a set of
items, its Petri-net semantics and replays traces on the net. The export stage
writes both; the semantic stage checks parallel runs' traces with them. Plain
data in and out: nothing here reads a model file or runs code.
"""
