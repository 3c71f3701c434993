"""Memory layout (paper Table 5): section sizes of the inference and the image, static and measured stack.

``run`` analyses the items (``memory.json``), ``report`` writes ``table5.md``,
``command`` adds ``assay memory``.
"""
