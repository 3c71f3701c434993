"""emlearn driver: Keras dense network -> emlearn C (run by the peer's own Python; imports nothing of Assay).

Request: {"model": .keras path, "out_dir": dir, "prefix": C identifier, "method": "loadable" | "inline"}.
emlearn's ``convert`` takes a ``keras.Sequential``; a functional model whose layers form one chain is
handed over as the Sequential of the same layers (the form emlearn documents), anything else as it is.
Result: the C file written, and emlearn's layers (its Dense layers, activations merged in), in order.
"""

import os
import shutil

os.environ["KERAS_BACKEND"] = "jax"  # the only backend in this environment (Assay's own setting is not ours)

from _protocol import main, says


def generate(request):
    import emlearn
    import keras

    keras.utils.clear_session()  # a driver serves many requests: no names or graphs left from the last one
    model = keras.models.load_model(request["model"], compile=False)
    if not isinstance(model, keras.Sequential) and _is_chain(model):
        model = keras.Sequential([keras.Input(model.input_shape[1:]), *model.layers[1:]])
    converted = emlearn.convert(model, method=request["method"], return_type="regressor")
    path = os.path.join(request["out_dir"], request["prefix"] + ".h")
    os.makedirs(request["out_dir"], exist_ok=True)
    converted.save(name=request["prefix"], file=path, inference=[request["method"]])
    headers = sorted(name for name in os.listdir(emlearn.includedir) if name.endswith(".h"))
    for name in headers:  # emlearn's C library is header-only: the code needs them beside it
        shutil.copy(os.path.join(emlearn.includedir, name), request["out_dir"])
    layers = [{"index": i, "activation": act, "inputs": int(w.shape[0]), "outputs": int(w.shape[1])}
              for i, (act, w) in enumerate(zip(converted.activations, converted.weights))]
    return {"files": [os.path.basename(path)], "headers": headers, "layers": layers,
            "keras_layers": [type(layer).__name__ for layer in model.layers]}


def _is_chain(model):
    """Every layer after the input takes the previous layer's output, and nothing else."""
    layers = model.layers
    return all(len(layer._inbound_nodes) == 1 and layer.input is layers[i].output
               for i, layer in enumerate(layers[1:]))


if __name__ == "__main__":
    # emlearn refuses a layer with NotImplementedError ("Layer type ... is not implemented"), an assertion
    # naming the unsupported option ("Layers without bias not supported"), or a ValueError naming what it
    # does not have ("Unsupported activation 'selu'", "Unknown model type: 'Functional'").
    main(generate, refuses=lambda exc: isinstance(exc, (NotImplementedError, AssertionError))
         or says("not supported", "not implemented", "unsupported", "unknown model type")(exc))
