"""V1 and V3 shapes, the §2.2 transformations, and V1's dispatch facts checked against the running code.

The layer tests (test_codegen_keras.py, test_codegen_onnx.py) already run V1
and V3 on every layer case through ``check_strategies`` (conftest.py); here:
what only these strategies promise (V1's struct table and call sequence, V3
without loops and with its size limit) and each transformation against the
reference on a model where it changes the code.
"""

import json
import re
import subprocess

import numpy as np
import pytest

import codegen
from codegen_support import STRICT_FLAGS, draw_inputs, onnx_reference, run_c, seed_weights
from conftest import check_strategies

keras = pytest.importorskip("keras")
layers = keras.layers


def _save(model, tmp_path, name):
    seed_weights(model)
    path = tmp_path / f"{name}.keras"
    model.save(path)
    x = draw_inputs(tuple(model.inputs[0].shape[1:]))
    return path, x, keras.ops.convert_to_numpy(model(x, training=False)).reshape(len(x), -1)


def _conv_relu_pool_bn(tmp_path):
    model = keras.Sequential([keras.Input((10, 10, 3)), layers.Conv2D(4, 3, activation="relu"),
                              layers.MaxPooling2D(2), layers.Conv2D(5, 2), layers.BatchNormalization(epsilon=0.01),
                              layers.Flatten(), layers.Dense(6), layers.BatchNormalization(), layers.Activation("relu"),
                              layers.Dense(3, activation="softmax")], name="cpb")
    return _save(model, tmp_path, "cpb")


@pytest.mark.parametrize("transforms", ["none", "fuse-activation", "fold-bn", "relu-after-pool",
                                        "fold-bn,relu-after-pool,fuse-activation"])
def test_each_transformation_preserves_the_semantics_in_every_strategy(tmp_path, transforms):
    path, x, reference = _conv_relu_pool_bn(tmp_path)
    out = tmp_path / "v2"
    manifest = codegen.generate(path, out, transforms=transforms, weights="c")
    assert float(np.max(np.abs(run_c(out, x) - reference))) <= 1e-5
    errors = check_strategies(path, out, "keras", "c", x, reference, 1e-5, transforms=transforms)
    assert set(errors) == {"v1", "v3"}
    changed = manifest["generator"]["options"]["transformed"]
    source = (out / manifest["entry"]["file"]).read_text()
    if "fold-bn" in transforms:
        assert changed["fold-bn"] == 2
        assert len(re.findall(r"folded into layer '(conv2d|dense)\w*' \(Property 4\)", source)) == 2
        assert not re.search(r"_scale\[", source)
    else:
        assert len(re.findall(r"\* cpb_batch_normalization\w*_scale\[", source)) == 2
    if "relu-after-pool" in transforms:
        assert changed["relu-after-pool"] == 1 and "applied after the pooling (Property 3)" in source
    if "fuse-activation" in transforms:
        assert changed["fuse-activation"] == 1 and "relu computed by layer" in source


def test_relu_after_pool_on_onnx_conv_relu_maxpool(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "crp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "crp.onnx"
    onnx.save(model, path)
    assert codegen.applicable_transforms(path) == ("relu-after-pool", "fuse-activation")
    x = draw_inputs((2, 8, 8))
    reference = onnx_reference(path, x)
    for transforms in ("relu-after-pool", "relu-after-pool,fuse-activation"):
        out = tmp_path / transforms
        manifest = codegen.generate(path, out, transforms=transforms)
        assert np.max(np.abs(run_c(out, x) - reference)) <= 1e-5
        assert check_strategies(path, out, "onnx", "auto", x, reference, 1e-5, transforms=transforms).keys() == {
            "v1", "v3"}
        ops = [layer["op"] for layer in manifest["layers"]]
        assert ops == ["Conv", "MaxPool", "Relu"]  # the ReLU now reads the pooled tensor


def test_v1_has_the_shape_of_listings_1_and_2(tmp_path):
    path, x, reference = _conv_relu_pool_bn(tmp_path)
    manifest = codegen.generate(path, tmp_path / "v1", strategy="v1", weights="c")
    entry = (tmp_path / "v1" / manifest["entry"]["file"]).read_text()
    assert re.search(r"cpb_net\[i\]\.layer_type\(&cpb_net\[i\], cpb_output_pre, cpb_output_cur\);\n\s+"
                     r"for \(int j = 0; j < cpb_net\[i\]\.layer_size; \+\+j\) \{\n\s+cpb_output_pre\[j\] = "
                     r"cpb_output_cur\[j\];", entry)
    net = (tmp_path / "v1" / "cpb_net.h").read_text()
    assert "static const struct assay_v1_layer cpb_net[" in net and ".actv_function = assay_v1_relu" in net
    lib = (tmp_path / "v1" / "assay_v1_lib.c").read_text()
    assert "malloc" not in lib + entry + net
    other = codegen.generate(path, tmp_path / "v1b", strategy="v1", name="other", weights="c")
    assert (tmp_path / "v1b" / "assay_v1_lib.c").read_text() == lib  # the library is the same for every model
    assert other["indirect_calls"][0]["sequence"] == manifest["indirect_calls"][0]["sequence"]
    for layer in manifest["layers"]:
        for loop in layer["loops"]:
            if "bound_expr" in loop and loop["function"] != manifest["entry"]["symbol"]:
                field = loop["bound_expr"].removeprefix("layer->")
                assert re.search(rf"\.{field} = {loop['bound']},", net) or loop["bound"] == 0, loop


def test_v1_refuses_a_branching_model_in_one_line(tmp_path):
    inputs = keras.Input((6,))
    outputs = layers.Add()([layers.Dense(4)(inputs), layers.Dense(4)(inputs)])
    path = tmp_path / "branch.keras"
    keras.Model(inputs, outputs).save(path)
    with pytest.raises(codegen.UnsupportedModel, match=r"sequential models only") as info:
        codegen.generate(path, tmp_path / "out", strategy="v1")
    assert "\n" not in str(info.value)


HOOK = """
#include <stdio.h>
#include <string.h>
#include "{prefix}inference.h"
void __cyg_profile_func_enter(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_enter(void *fn, void *site) {{ printf("enter %p %p\\n", fn, site); }}
void __cyg_profile_func_exit(void *fn, void *site) {{ (void)fn; (void)site; }}
int main(void) __attribute__((no_instrument_function));
int main(void) {{
    static float x[{n_in}], y[{n_out}];
    for (int i = 0; i < {n_in}; ++i) x[i] = (float)(i % 7) / 7.0f - 0.5f;
    printf("run\\n");
    {prefix}inference(x, y);
    return 0;
}}
"""


def test_v1_call_sequence_matches_the_calls_observed_when_running(tmp_path):
    """Compile V1 with gcc's -finstrument-functions and log every call: callee and call site.

    Call sites are mapped to source lines with addr2line (the returned address
    minus one lies in the call instruction), callees to names with nm; the
    manifest's ``sequence`` of each indirect call must be the callees
    observed at that line, in order.
    """
    path, _, _ = _conv_relu_pool_bn(tmp_path)
    out = tmp_path / "v1"
    manifest = codegen.generate(path, out, strategy="v1", weights="c")
    n_in, n_out = manifest["inputs"][0]["size"], manifest["outputs"][0]["size"]
    (out / "main.c").write_text(HOOK.format(prefix=manifest["prefix"], n_in=n_in, n_out=n_out))
    exe = tmp_path / "instrumented"
    sources = [str(out / s) for s in manifest["sources"]]
    subprocess.run(["gcc", *STRICT_FLAGS, "-g", "-no-pie", "-finstrument-functions", f"-I{out}", *sources,
                    str(out / "main.c"), "-lm", "-o", str(exe)], check=True)
    log = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("run\n", 1)[1]
    names = {}
    for line in subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 3:
            names[int(fields[0], 16)] = fields[2]
    calls = [(int(fn, 16), int(site, 16)) for fn, site in (row.split()[1:] for row in log.splitlines())]
    sites = subprocess.run(["addr2line", "-e", str(exe)] + [hex(site - 1) for _, site in calls],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    observed: dict[tuple[str, int], list[str]] = {}
    for (fn, _), where in zip(calls, sites):
        file, _, line = where.rpartition(":")
        key = (file.rsplit("/", 1)[-1], int(line.split()[0]) if line[:1].isdigit() else -1)
        observed.setdefault(key, []).append(names[fn])
    declared = manifest["indirect_calls"]
    assert len(declared) >= 5
    for call in declared:
        assert observed.get((call["file"], call["line"])) == call["sequence"], call
        assert set(call["sequence"]) == set(call["targets"])
    indirect_lines = {(c["file"], c["line"]) for c in declared}
    direct = {key: seen for key, seen in observed.items() if key not in indirect_lines and key[1] > 0}
    assert not [key for key in direct if key[0] in {"assay_v1_lib.c", manifest["entry"]["file"]}], direct


def test_v3_has_no_loops_and_one_statement_per_mac(tmp_path):
    path, x, reference = _conv_relu_pool_bn(tmp_path)
    manifest = codegen.generate(path, tmp_path / "v3", strategy="v3")
    source = (tmp_path / "v3" / manifest["entry"]["file"]).read_text()
    assert not re.search(r"\b(for|while|do|goto)\b", re.sub(r"/\*.*?\*/", "", source, flags=re.S))
    products = len(re.findall(r"acc \+= \S+ \* -?[0-9.e+-]+f;", source))
    # conv 8x8x4 outputs x 3x3x3, conv 3x3x5 x 2x2x4, dense 6 x 45, dense 3 x 6 (no padding: all cells written)
    assert products == manifest["generator"]["options"]["macs"] == 6912 + 720 + 270 + 18
    assert np.max(np.abs(run_c(tmp_path / "v3", x) - reference)) <= 1e-5
    assert manifest["sources"] == [manifest["entry"]["file"]]
    assert all(layer["loops"] == [] for layer in manifest["layers"])


def test_v3_refuses_above_its_limit_with_the_count(tmp_path):
    path, _, _ = _conv_relu_pool_bn(tmp_path)
    with pytest.raises(codegen.UnsupportedModel, match=r"would write [0-9,]+ multiply-accumulate statements, "
                                                       r"above its limit of 100;") as info:
        codegen.generate(path, tmp_path / "out", strategy="v3", max_macs=100)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out" / "cpb_inference.c").exists()


def test_manifest_records_strategy_and_transforms(tmp_path):
    path, _, _ = _conv_relu_pool_bn(tmp_path)
    manifest = codegen.generate(path, tmp_path / "m", strategy="v1", transforms="fold-bn")
    options = manifest["generator"]["options"]
    assert manifest["generator"]["name"] == "assay-v1"
    assert options["strategy"] == "v1" and options["transforms"] == ["fold-bn"]
    json.dumps(manifest)
