"""acetone-nnet driver: a Keras graph -> ACETONE C (run by the peer's own Python; imports nothing of Assay).

Request: {"spec": graph JSON, "weights": .npz, "out_dir": dir, "function_name": C name,
"versions": {layer type: implementation}}. The model is rebuilt in Keras 2 (``_keras2.py``) and handed to
ACETONE's ``CodeGenerator`` as a Keras model object. Result: the files ACETONE wrote, its implementations
per layer type, and its layers (index, type, chosen implementation) in generation order: the layer mapping.
"""

import os

from _protocol import main, says


def generate(request):
    import _keras2
    from acetone_nnet import CodeGenerator, list_all_implementations

    model = _keras2.load(request["spec"], request["weights"])
    generator = CodeGenerator(file=model, function_name=request["function_name"], nb_tests=1,
                              versions=request.get("versions") or None, verbose=False)
    generator.generate_c_files(request["out_dir"])
    layers = [{"index": layer.idx, "op": layer.name, "implementation": generator.versions.get(layer.idx),
               "class": type(layer).__name__} for layer in generator.layers]
    return {"files": sorted(os.listdir(request["out_dir"])), "layers": layers,
            "implementations": list_all_implementations()}


if __name__ == "__main__":
    # ACETONE's parser refuses a layer or mode with a TypeError/ValueError saying so (its own message).
    main(generate, refuses=says("not supported", "not implemented"))
