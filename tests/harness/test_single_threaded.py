"""``harness.single_threaded``: one BLAS and OpenMP thread in an Assay process and its children, unless the user
set a count. Each case runs in a new interpreter (the policy acts at import) with the thread variables removed
from its environment, and reads numpy's BLAS threads through threadpoolctl."""

import json
import os
import subprocess
import sys

import pytest

import harness

PROBE = """
import json, os, sys
{imports}
from threadpoolctl import threadpool_info
blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
print(json.dumps({{"blas": blas, "env": {{name: os.environ.get(name) for name in {names!r}}}}}))
"""


def probe(imports: str, **variables: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in harness.THREAD_VARIABLES} | variables
    code = PROBE.format(imports=imports, names=harness.THREAD_VARIABLES)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("imports", ["import harness, numpy", "import numpy, harness"],
                         ids=["harness first", "numpy first"])
def test_an_assay_process_computes_with_one_blas_thread(imports):
    """Whether numpy is loaded before Assay (the environment comes too late: threadpoolctl) or after."""
    found = probe(imports)
    assert found["env"] == {name: "1" for name in harness.THREAD_VARIABLES}  # what its children inherit
    assert found["blas"] and set(found["blas"]) == {1}


def test_a_count_the_user_set_wins():
    found = probe("import numpy, harness", OPENBLAS_NUM_THREADS="2")
    assert found["env"]["OPENBLAS_NUM_THREADS"] == "2" and found["env"]["OMP_NUM_THREADS"] is None
    assert set(found["blas"]) == {2}
