"""``assay peers``: the isolated environments of other people's generators (docs/peers.md)."""
