"""Assay: a verification and qualification harness for neural-network C code generators.

Data flows one way: model -> generator -> build -> run -> compare -> report.

Every Assay process computes with one BLAS and OpenMP thread unless the user set a count (``single_threaded``):
Assay runs its own work in parallel (``--jobs``, xdist workers, stage subprocesses), and library threads on top of
that oversubscribe the cores. OpenBLAS's threads wait for work by spinning: two processes deriving acas-reg200's
bound on the 2-core machine ran 8.5 times slower with its default threads than with one (373 against 44 ms per
input, ``benchmarks/blas_threads.py``; 32 times in an earlier run), while one process alone is as fast with one
thread as with two (docs/configuration.md).
"""

import os
import sys

__version__ = "0.1.0"

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded() -> None:
    """One BLAS and OpenMP thread in this process and the ones it starts, unless one of ``THREAD_VARIABLES`` is
    set (the user's choice wins): by the environment for a library not loaded yet, and through threadpoolctl for
    one already loaded (numpy imported before Assay)."""
    if any(name in os.environ for name in THREAD_VARIABLES):
        return
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    if "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)


single_threaded()
