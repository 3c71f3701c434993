"""The graph inputs and outputs of an ONNX model as the drivers report them (run by a peer's own Python; imports
nothing of Assay): the ONNX-reading peers (emx-onnx-cgen, Aidge) describe the tensors of the C they wrote in
the same form, so that the adapter checks one shape against the model's."""


def tensors(values, model) -> list[dict]:
    """Each of ``values`` (a graph's inputs or outputs) that is not an initializer: its name and shape, a symbolic
    dimension by its name."""
    initializers = {init.name for init in model.graph.initializer}
    return [{"name": value.name, "shape": [dim.dim_value if dim.HasField("dim_value") else dim.dim_param
                                           for dim in value.type.tensor_type.shape.dim]}
            for value in values if value.name not in initializers]
