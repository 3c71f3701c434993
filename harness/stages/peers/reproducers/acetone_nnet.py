"""Reproduces an acetone-nnet finding without Assay (written by ``assay peers report``; docs/peers.md).

Needs only what ACETONE itself needs: ``pip install acetone-nnet==1.0.post1 tensorflow==2.12.1`` (the versions
in ``finding.json``; Python 3.10 or 3.11) and gcc. Run ``python reproduce.py`` in this folder. For each
implementation named in ``finding.json`` it asks ACETONE's own API for C from ``model.h5``
(``CodeGenerator(file=..., versions={"Conv2D": ...}).generate_c_files(...)`` into ``c/<implementation>/``),
compiles it with ``driver.c`` (gcc -O0 -std=c99, ACETONE's ``main.c`` and ``test_dataset.c`` left out), runs
it on ``inputs.npy`` and compares with ``expected.npy`` (Keras's outputs, computed by Assay) within
``|C - expected| <= atol + rtol * |expected|`` (``reproducer_common.py``). It also checks that Keras 2 reads
``model.h5`` to the same function (``model.predict``). Writes ``actual/<implementation>.npy`` and
``reproduction.json``; prints one line per implementation. Exit status 1 when an implementation listed as
defective is wrong, NaN, crashes or cannot be generated (the defect is reproduced), 0 when every one matches
(the defect is gone).
"""

import os
import shutil
import sys

import reproducer_common

HERE = os.path.dirname(os.path.abspath(__file__))
NOT_COMPILED = ("main.c", "test_dataset.c")  # ACETONE's test program and its random data set


def generate(finding, implementation):
    from acetone_nnet import CodeGenerator

    out = os.path.join(HERE, "c", implementation)
    shutil.rmtree(out, ignore_errors=True)  # ACETONE refuses to overwrite: a re-run starts from an empty folder
    os.makedirs(out)
    # ACETONE's implementations are its Conv2D ones; "default" lets it choose (a model without convolution).
    versions = None if implementation == "default" else {"Conv2D": implementation}
    generator = CodeGenerator(file=os.path.join(HERE, finding["model"]), function_name="inference", nb_tests=1,
                              versions=versions, verbose=False)
    generator.generate_c_files(out)
    return out


def make(finding, implementation):
    source_dir = generate(finding, implementation)
    sources = sorted(os.path.join(source_dir, name) for name in os.listdir(source_dir)
                     if name.endswith(".c") and name not in NOT_COMPILED)
    return reproducer_common.build(HERE, finding, source_dir, sources, "inference.h",
                                   "inference(output, input)")


def predict(finding, inputs):
    import tensorflow as tf

    keras2 = tf.keras.models.load_model(os.path.join(HERE, finding["model"]), compile=False)
    return keras2.predict(inputs.reshape((len(inputs), *keras2.input_shape[1:])), verbose=0)


if __name__ == "__main__":
    sys.exit(reproducer_common.main(HERE, predict, make))
