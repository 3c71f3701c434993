"""``python -m codegen MODEL OUT_DIR [--strategy v1|v2|v3] [--transform ...]``: generate C and its manifest."""

from __future__ import annotations

import argparse
import sys

from codegen import UnsupportedModel, __version__, generate
from codegen.transforms import ORDER
from codegen.v3 import DEFAULT_MAX_MACS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m codegen",
        description=f"assay codegen {__version__}: generate predictable C (ACETONE strategies V1, V2, V3; static "
                    "buffers) from a Keras, ONNX or NNEF model, with manifest.json describing every layer's lines "
                    "and loops.")
    parser.add_argument("model", help="model file: .keras or .h5 (Keras), .onnx (ONNX), or an NNEF folder "
                                       "(graph.nnef and its .dat files)")
    parser.add_argument("out_dir", help="directory for the C files and manifest.json (created if missing)")
    parser.add_argument("--name", help="model name; its C-identifier form prefixes every symbol "
                                       "(default: the file name without suffix)")
    parser.add_argument("--frontend", choices=("keras", "onnx", "nnef"),
                        help="source format (default: from the suffix; a folder is NNEF)")
    parser.add_argument("--weights", choices=("auto", "c", "incbin"), default="auto",
                        help="c: const arrays in C; incbin: a .bin blob linked by a .S file with .incbin; "
                             "auto (default): incbin above 1,000,000 parameters")
    parser.add_argument("--strategy", choices=("v1", "v2", "v3"), default="v2",
                        help="v1: generic loop over layer structs through function pointers; v2 (default): "
                             "inlined loops with literal bounds; v3: unrolled, weights as literals")
    parser.add_argument("--transform", help=f"comma-separated transformations, exactly: {', '.join(ORDER)}, or "
                                            "none (default: fuse-activation)")
    parser.add_argument("--max-macs", type=int, default=DEFAULT_MAX_MACS,
                        help=f"v3 refuses models with more multiply-accumulates (default {DEFAULT_MAX_MACS:,})")
    args = parser.parse_args(argv)
    try:
        result = generate(args.model, args.out_dir, name=args.name, frontend=args.frontend, weights=args.weights,
                          strategy=args.strategy, transforms=args.transform, max_macs=args.max_macs)
    except (UnsupportedModel, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{result['entry']['symbol']}: {len(result['layers'])} layers, sources "
          f"{', '.join(result['sources'])} in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
