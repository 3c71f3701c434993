"""``python -m codegen MODEL OUT_DIR``: generate V2 C code and its manifest."""

from __future__ import annotations

import argparse
import sys

from codegen import GENERATOR_NAME, UnsupportedModel, __version__, generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m codegen",
        description=f"{GENERATOR_NAME} {__version__}: generate predictable C (ACETONE strategy V2, one inlined "
                    "inference function, static buffers, literal loop bounds) from a Keras, ONNX or NNEF model, "
                    "with manifest.json describing every layer's lines and loops.")
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
    args = parser.parse_args(argv)
    try:
        result = generate(args.model, args.out_dir, name=args.name, frontend=args.frontend, weights=args.weights)
    except (UnsupportedModel, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{result['entry']['symbol']}: {len(result['layers'])} layers, sources "
          f"{', '.join(result['sources'])} in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
