"""The one error the generator reports to its users."""


class UnsupportedModel(Exception):
    """The model uses a layer, an option or a structure the generator does not handle.

    The message is one line naming the file, the layer (or ONNX node) with its
    type, and why, e.g. ``m.keras: layer 'lstm' (LSTM) is not supported``.
    """
