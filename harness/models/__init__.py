"""Models: the zoo of paper benchmarks (``zoo``) and the user files it reads (``user_files``).

A zoo name or a user file (``.keras``, ``.h5``, ``.onnx``, ``.nnet``) becomes a
``Model`` (``model``): the files the references and generators read, its
shapes, layouts, input domain and tolerance. The paper's networks are built by
``paper``, the trained ones by ``trained``; a built or converted model is
described once in the cache (``cache``). A user file's ``<file>.assay.toml``
(``sidecar``) sets its domain and tolerances. A new format is a module beside
``nnet.py`` and its suffix in the entry-point group ``assay.model_formats``
(``user_files.suffixes``; docs/architecture.md).
"""
