"""Models: the zoo of paper benchmarks (``zoo``) and the user files it reads (``user_files``).

A zoo name or a user file (``.keras``, ``.h5``, ``.onnx``, ``.nnet``) becomes a
``Model`` (``model``): the files the references and generators read, its
shapes, layouts, input domain and tolerance. A user file's
``<file>.assay.toml`` (``sidecar``) sets its domain and tolerances;
``budget`` refuses models too large to verify. Loaders for a new format go
beside ``nnet.py`` and are dispatched from ``user_files.SUFFIXES``.
"""
