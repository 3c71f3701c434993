"""keras2c driver: a Keras graph -> keras2c C (run by the peer's own Python; imports nothing of Assay).

Request: {"spec": graph JSON, "weights": .npz, "out_dir": dir, "function_name": C name, "malloc": bool}.
Result: the files keras2c wrote and the layer names of the rebuilt model (keras2c names its arrays after them).
"""

import os

from _protocol import main, says


def generate(request):
    import _keras2
    from keras2c import k2c

    model = _keras2.load(request["spec"], request["weights"])
    os.makedirs(request["out_dir"], exist_ok=True)
    os.chdir(request["out_dir"])  # keras2c writes into the current directory
    k2c(model, request["function_name"], malloc=request["malloc"], num_tests=0, verbose=False)
    return {"files": sorted(os.listdir(".")),
            "layers": [{"index": i, "name": layer.name, "op": type(layer).__name__}
                       for i, layer in enumerate(model.layers)]}


if __name__ == "__main__":
    # keras2c's check_model refuses with an AssertionError or error naming the unsupported layer/option.
    main(generate, refuses=lambda exc: isinstance(exc, (AssertionError, NotImplementedError))
         or says("not supported", "unsupported")(exc))
