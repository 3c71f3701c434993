"""Timing analysis. ``wcet.timing`` holds the timing models that price instructions in cycles; measured
execution (``harness.measurement.cycles``) and the static WCET analyzer (``wcet.analyzer``) use the very same
definitions. The package is standalone: it never imports the harness (``python -m wcet ELF FUNCTION``).

The modules a bound of one ELF imports (``wcet.bound`` and what it uses) declare their records without
``dataclasses``: frozen ones as ``collections.namedtuple`` subclasses (``__slots__ = ()``; ``x._replace(...)``
for ``dataclasses.replace``; such a record is also a tuple, equal to the plain tuple of its fields, which no code
relies on), mutable ones as classes with ``__slots__``, and a timing model's parameters as
annotated class attributes read by ``TimingModel`` itself. ``dataclasses`` imports ``inspect`` (with ``ast``,
``dis``, ``tokenize``): about 1 MB of every ``python -m wcet`` process, against the per-ELF goal of issue 45 (at
most 1.2x OTAWA's peak memory; docs/benchmarks.md). For the same reason they do not import ``typing`` (a module's
annotation-only imports sit under a local ``TYPE_CHECKING = False``, the value type checkers take as True; 0.6 MB),
and ``wcet.bound`` reads the library annotations (TOML: ``tomllib`` imports ``typing`` and ``datetime``, 1.3 MB
with it) only when a loop needs a bound the given facts lack. ``tests/wcet/test_startup.py`` checks that none of
them is imported.
"""
