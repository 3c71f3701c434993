"""The one error the generator reports to its users."""


class UnsupportedModel(Exception):
    """The model uses a layer, an option or a structure the generator does not handle.

    The message is one line naming the file, the layer (or ONNX node) with its
    type, and why, e.g. ``m.keras: layer 'lstm' (LSTM) is not supported``.
    """


class OverLimit(UnsupportedModel):
    """A model above a size limit the caller sets (V3's ``max_macs``): ``cause`` says by how much, the message adds
    how to raise the limit through ``generate``'s own option, and a tool that offers the limit under another name
    (a harness's command line) can say that instead."""

    def __init__(self, cause: str, advice: str):
        super().__init__(f"{cause}; {advice}")
        self.cause = cause
