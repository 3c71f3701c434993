"""What the user-file loader says about a library's errors, and which content a path holds (issue 44)."""

import hashlib
import os

import numpy as np
import pytest

from harness.models import user_files, zoo
from harness.models.model import file_sha256


def test_a_traced_tensorflow_error_is_one_line_and_its_frames_stay_in_the_detail():
    """A non-ASCII layer name in a function TensorFlow traces (what the float64 arbiter does) raises a ValueError whose
    message starts with "in user code:" and file paths: the cause keeps the error after them, one line."""
    from harness.models.tf_runtime import keras, tensorflow

    k = keras()
    inputs = k.Input((2,), name="x")
    net = k.Model(inputs, k.layers.Dense(1, name="couché")(inputs), name="net")
    traced = tensorflow().function(lambda sample: net(sample, training=False))
    with pytest.raises(ValueError) as info:
        traced(np.zeros((1, 2), np.float32))
    assert str(info.value).lstrip().startswith("in user code:")
    line, whole = user_files.cause(info.value), user_files.detail(info.value)
    assert "\n" not in line and 'File "' not in line and "\x1b" not in line and "Arguments received" not in line, line
    assert line.startswith("ValueError: ") and line.count("ValueError") == 1, line
    assert "'couché' is not a valid scope name" in line
    assert whole is not None and 'File "' in whole and "couché" in whole


def test_a_one_line_message_has_no_detail():
    error = ValueError("bad value")
    assert user_files.cause(error) == "ValueError: bad value" and user_files.detail(error) is None


def test_source_sha256_is_the_content_of_a_file_or_nnef_folder_and_nothing_else(tmp_path):
    model = tmp_path / "net.onnx"
    model.write_bytes(b"not even a model")
    assert zoo.source_sha256(model) == hashlib.sha256(b"not even a model").hexdigest()  # loadable or not
    folder = tmp_path / "net.nnef"
    folder.mkdir()
    (folder / "graph.nnef").write_text("version 1.0;\n")
    assert zoo.source_sha256(folder) == file_sha256(folder)
    (tmp_path / "plain.onnx").mkdir()
    os.mkfifo(tmp_path / "pipe.onnx")  # never opened: it would block
    for nothing in ("plain.onnx", "pipe.onnx", "missing.onnx"):
        assert zoo.source_sha256(tmp_path / nothing) is None
    assert zoo.source_sha256("lenet5") is None  # a zoo name names no file
