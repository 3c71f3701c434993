"""The activation operator on Gelu's erff (codegen/activations.py writes ``0.5f * v * (1.0f + erff(v * c))``):
the call is swapped with the identity and with tanhf, and the mutants compile."""

import subprocess

from codegen.activations import expression
from harness.stages.mutate.operators import code_mutants


def test_erff_of_gelu_is_swapped_with_the_identity_and_tanh(tmp_path):
    path = tmp_path / "net.c"
    path.write_text("#include <math.h>\nvoid net(const float *input, float *output) {\n"
                    "    for (int k = 0; k < 4; ++k) {\n        const float v = input[k];\n"
                    f"        output[k] = {expression('gelu', (), 'v')};\n    }}\n}}\n")
    swaps = {(m.original, m.replacement) for m in code_mutants(path) if m.operator == "activation"}
    assert swaps == {("erff(v * 0.707106769f)", "v * 0.707106769f"),
                     ("erff(v * 0.707106769f)", "tanhf(v * 0.707106769f)")}
    for mutant in (m for m in code_mutants(path) if m.operator == "activation"):
        mutated = tmp_path / "mutated.c"
        mutated.write_text(mutant.apply(path.read_text()))
        done = subprocess.run(["gcc", "-c", "-Wall", "-Werror", str(mutated), "-o", str(tmp_path / "m.o")],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
