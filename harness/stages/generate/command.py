"""``assay generate``: one model's C and manifest, written where the user says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_common_options
from harness.errors import USER_ERRORS, AssayError


def cmd_generate(args: argparse.Namespace) -> int:
    from harness import generators
    from harness.core.plan import Settings, load_model

    model = load_model(args.model, Settings(n_inputs=1, model_seed=args.model_seed, work_dir=args.work))
    generator = generators.get(args.generator)
    variant = args.variant or generator.variants(model)[0]
    if variant not in generator.variants(model):
        raise AssayError(f"{args.generator} has no variant '{variant}' for {model.name}; "
                         f"choose from {', '.join(generator.variants(model))}")
    try:
        code = generator.generate(model, variant, args.out)
    except USER_ERRORS:
        raise
    except Exception as exc:  # a generator crash: one line naming the model, never a traceback
        print(f"assay: error: {model.name}: {generator.name} ({variant}) crashed: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    print(f"{model.name}: {generator.name} ({variant}) -> {code.directory} "
          f"[{', '.join(p.name for p in code.sources)}; entry {code.entry}]")
    return 0


def add_command(subparsers) -> None:
    gen = subparsers.add_parser("generate", help="generate C for one model and write it with its manifest")
    gen.add_argument("--model", required=True,
                     help="zoo name or model file (.keras, .h5, .onnx, .nnet, ACETONE .json, NNEF folder)")
    gen.add_argument("--out", type=Path, required=True, help="output directory for the C and manifest.json")
    gen.add_argument("--generator", default="assay-v2", help="generator name (default assay-v2)")
    gen.add_argument("--variant", help="generator variant; for assay-v2 the source format read: keras, onnx or nnef "
                                       "(default: the first the model has)")
    add_common_options(gen)
    gen.set_defaults(func=cmd_generate)
