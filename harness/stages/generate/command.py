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
    variants = getattr(generator, "all_variants", generator.variants)(model)
    variant = args.variant or variants[0]
    if args.transform is not None:
        if not getattr(generator, "transformable", False):
            raise AssayError(f"{args.generator} takes no --transform; the assay-v1, assay-v2 and assay-v3 "
                             "generators do")
        # the format part of the variant, then exactly the named transformations (docs/codegen.md)
        names = [t.strip() for t in args.transform.split(",") if t.strip()]
        variant = "+".join([variant.split("+")[0], *(names or ["none"])])
        if variant.split("+")[0] not in {v.split("+")[0] for v in variants}:
            raise AssayError(f"{args.generator} has no variant '{variant}' for {model.name}; "
                             f"choose from {', '.join(variants)}")
    elif variant not in variants:
        raise AssayError(f"{args.generator} has no variant '{variant}' for {model.name}; "
                         f"choose from {', '.join(variants)}")
    options = {}
    if args.max_macs is not None:
        if not getattr(generator, "takes_max_macs", False):
            raise AssayError(f"{args.generator} takes no --max-macs; assay-v3 does")
        options["max_macs"] = args.max_macs
    try:
        code = generator.generate(model, variant, args.out, **options)
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
    gen.add_argument("--generator", default="assay-v2",
                     help="generator name: assay-v1, assay-v2 (default) or assay-v3 (ACETONE's strategies)")
    gen.add_argument("--variant", help="generator variant; for assay-v1/v2/v3 the source format read, keras, onnx or nnef, "
                                       "optionally with transformations (keras+fold-bn+fuse-activation) "
                                       "(default: the first the model has)")
    gen.add_argument("--transform", help="comma-separated semantics-preserving transformations to apply, exactly: "
                                         "fold-bn, relu-after-pool, fuse-activation, or none (default: the "
                                         "generator's, fuse-activation)")
    gen.add_argument("--max-macs", type=_positive, metavar="N",
                     help="assay-v3 only: generate up to N multiply-accumulate statements (default: codegen's "
                          "own limit, docs/codegen.md); a campaign checks that C with --generators dir:OUT")
    add_common_options(gen)
    gen.set_defaults(func=cmd_generate)


def _positive(text: str) -> int:
    """A whole number of at least 1, for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
