"""model file -> IR -> transformed IR (§2.2) -> V1, V2 or V3 C files + manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

from codegen import emit, manifest, memory, params, v1, v3
from codegen import transforms as transforms_module
from codegen.cwriter import INT_MAX, c_ident
from codegen.errors import UnsupportedModel
from codegen.ir import Graph

STRATEGIES = {"v1": "assay-v1", "v2": "assay-v2", "v3": "assay-v3"}  # strategy -> its generator name
__version__ = "0.1.0"

SUFFIXES = {".keras": "keras", ".h5": "keras", ".hdf5": "keras", ".onnx": "onnx", ".nnef": "nnef"}


def _load(path: Path, fmt: str) -> Graph:
    if fmt == "keras":
        from codegen import frontend_keras

        return frontend_keras.load(path)
    if fmt == "onnx":
        from codegen import frontend_onnx, frontend_onnx_quant

        frontend_onnx_quant.register()
        return frontend_onnx.load(path)
    if fmt == "nnef":
        from codegen import frontend_nnef

        return frontend_nnef.load(path)
    raise ValueError(f"frontend must be 'keras', 'onnx' or 'nnef', not {fmt!r}")


def _check_sizes(graph: Graph) -> None:
    """Refuse tensors or parameters of more than INT_MAX elements.

    Loop counters and indices in the generated code are ``int``; every loop
    bound and index stays below the size of some tensor or parameter array,
    so this one check keeps them all in range.
    """
    for node in graph.nodes:
        arrays = [(f"its output {list(node.output_shape)}", graph.tensors[node.output].size)] if node.output else []
        arrays += [(f"its input {list(graph.tensors[t].shape)}", graph.tensors[t].size) for t in node.inputs]
        arrays += [(f"its parameter '{key}' {list(value.shape)}", value.size) for key, value in node.params.items()]
        for what, size in arrays:
            if size > INT_MAX:
                raise UnsupportedModel(f"{graph.source}: layer '{node.name}' ({node.kind}) has {size} elements in "
                                       f"{what}; loops and buffers are limited to INT_MAX ({INT_MAX}) elements")


def _sha256(path: Path) -> str:
    """SHA-256 of a model file, or of the names and bytes of the files of a model folder (NNEF)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _open(model_path: str | Path, frontend: str | None) -> tuple[Path, str, Graph]:
    path = Path(model_path).resolve()
    if path.name == "graph.nnef":
        path = path.parent  # an NNEF model is its folder: the graph and its .dat tensors
    if not path.is_file() and not (path / "graph.nnef").is_file():
        raise FileNotFoundError(f"{model_path}: no such model file (or NNEF folder with graph.nnef)")
    fmt = frontend or ("nnef" if path.is_dir() else SUFFIXES.get(path.suffix.lower()))
    if fmt is None:
        raise UnsupportedModel(f"{path.name}: cannot tell the format from the suffix '{path.suffix}'; "
                               "pass frontend='keras', 'onnx' or 'nnef'")
    graph = _load(path, fmt)
    _check_sizes(graph)
    return path, fmt, graph


def applicable_transforms(model_path: str | Path, *, frontend: str | None = None) -> tuple[str, ...]:
    """The §2.2 transformations that change this model (``transforms.applicable``)."""
    return transforms_module.applicable(_open(model_path, frontend)[2])


def generate(model_path: str | Path, out_dir: str | Path, *, name: str | None = None,
             frontend: str | None = None, weights: str = "auto", strategy: str = "v2",
             transforms=None, max_macs: int = v3.DEFAULT_MAX_MACS, cores: int = 1,
             schedule: list[list[dict]] | None = None, omit_wait: str | None = None,
             generator_name: str | None = None) -> dict:
    """Generate C for ``model_path`` into ``out_dir``; return (and write) the manifest.

    ``strategy``: ``v1`` (generic loop over layer structs, §3.2), ``v2``
    (inlined loops, §3.3) or ``v3`` (unrolled, literals, §3.4).
    ``transforms``: the §2.2 transformations to apply (names of
    ``transforms.ORDER``, a list or comma-separated string; ``()`` or
    ``"none"`` for none); default ``transforms.DEFAULT`` (fuse-activation).
    ``max_macs``: V3 refuses models with more multiply-accumulates than this.
    With a ``schedule`` (per core, its tasks ``{"node", "start", "end"}``), the
    V2 code is parallel: one inference function per core (``codegen.parallel``);
    ``omit_wait`` leaves a flag wait out, for mutation tests of the trace check only.
    ``generator_name``: the generator the manifest and the files' banners name (default: the strategy's,
    ``STRATEGIES``); an adapter registered under another name passes its own.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if weights not in ("auto", "c", "incbin"):
        raise ValueError(f"weights must be 'c', 'incbin' or 'auto', not {weights!r}")
    chosen = transforms_module.parse(transforms)
    path, fmt, graph = _open(model_path, frontend)
    if graph.quantization and (strategy != "v2" or schedule is not None):
        generator = generator_name or STRATEGIES[strategy]
        what = f"{generator} generates float code only" if strategy != "v2" else \
            "parallel code is generated for float models only"
        raise UnsupportedModel(f"{path.name}: {what}: the model is quantized ({graph.quantization['activations']}, "
                               f"{graph.quantization['format']}); assay-v2 generates its integer code")
    changed = transforms_module.apply(graph, chosen)
    if strategy == "v3":
        v3.check_size(graph, max_macs)

    ident = c_ident(name or path.stem)
    prefix = f"{ident}_"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (f"{prefix}params.c", f"{prefix}params.h", f"{prefix}weights.S", f"{prefix}weights.bin",
                  f"{prefix}net.h", f"{v1.LIB}.c", f"{v1.LIB}.h"):
        (out / stale).unlink(missing_ok=True)

    generator_name = generator_name or STRATEGIES[strategy]
    banner = (f"Generated by {generator_name} {__version__} (ACETONE strategy {strategy.upper()}) from {path.name}; "
              "do not edit.")
    c_file, h_file = f"{prefix}inference.c", f"{prefix}inference.h"
    options = {"frontend": fmt, "strategy": strategy, "transforms": list(chosen), "transformed": changed}
    common = dict(model={"name": name or path.stem, "source": str(path), "format": fmt, "sha256": _sha256(path)},
                  prefix=prefix, c_file=c_file, graph=graph, accumulation=manifest.accumulation(graph, strategy))

    if strategy == "v3":
        plan = memory.plan(graph, f"{prefix}arena")
        layers, entry, signature, parts = v3.write_inference(out / c_file, graph, prefix, plan, [h_file], banner)
        (out / h_file).write_text(emit.write_header(prefix, signature, graph, banner))
        options.update(weights="literals", max_macs=max_macs, macs=v3.macs(graph))
        result = manifest.build(generator={"name": generator_name, "version": __version__, "options": options},
                                entry=entry, signature=signature, sources=[c_file], headers=[h_file],
                                code_symbols=[entry, *parts],
                                data_symbols=[plan.arena_symbol] if plan.arena_size else [],
                                layers=layers, **common)
        manifest.write(result, out)
        return result

    arrays, symbols = params.collect(graph, prefix)
    mode = params.resolve_mode(weights, arrays)
    options["weights"] = mode
    chain = v1.sequence(graph) if strategy == "v1" else None  # refuse a non-sequential model before writing
    param_files = params.write(arrays, out, prefix, mode, banner)
    generator = {"name": generator_name, "version": __version__, "options": options}

    if strategy == "v1":
        lib = v1.library()
        (out / f"{v1.LIB}.c").write_text(lib.source)
        (out / f"{v1.LIB}.h").write_text(lib.header)
        entry = f"{prefix}inference"
        signature = f"void {entry}(const float *input, float *output)"
        code = v1.write(graph, chain, prefix, lib, symbols, param_files.header, banner, c_file, h_file)
        (out / c_file).write_text(code.inference)
        (out / f"{prefix}net.h").write_text(code.net_header)
        (out / h_file).write_text(emit.write_header(prefix, signature, graph, banner))
        result = manifest.build(
            generator=generator, entry=entry, signature=signature,
            sources=[c_file, f"{v1.LIB}.c", *param_files.sources],
            headers=[h_file, f"{prefix}net.h", f"{v1.LIB}.h", param_files.header],
            code_symbols=code.code_symbols, data_symbols=list(param_files.data_symbols) + code.data_symbols,
            layers=code.layers, indirect_calls=code.indirect_calls, **common)
        manifest.write(result, out)
        return result

    if schedule is not None:
        if strategy != "v2":
            raise UnsupportedModel(f"{path.name}: parallel code is generated for strategy V2 only, not "
                                   f"{strategy.upper()}")
        generator["options"]["cores"] = cores
        return _generate_parallel(graph, out, prefix, c_file, h_file, param_files, banner, symbols, cores,
                                  schedule, omit_wait, generator=generator, model=common["model"],
                                  accumulation=common["accumulation"])

    plan = memory.plan(graph, f"{prefix}arena")
    inference = emit.write_inference(graph, prefix, plan, symbols, [h_file, param_files.header], banner)
    (out / c_file).write_text(inference.text)
    (out / h_file).write_text(emit.write_header(prefix, inference.signature, graph, banner))

    data_symbols = list(param_files.data_symbols) + ([plan.arena_symbol] if plan.arena_size else [])
    data_symbols += [symbol for symbol, _ in plan.integer_arenas.values()]
    result = manifest.build(
        generator=generator, entry=inference.entry, signature=inference.signature,
        sources=[c_file, *param_files.sources], headers=[h_file, param_files.header],
        code_symbols=[inference.entry], data_symbols=data_symbols, layers=inference.layers, **common)
    if plan.arena_size:
        result["arena"] = {"symbol": plan.arena_symbol, "floats": plan.arena_size}
    if plan.integer_arenas:
        result["integer_arenas"] = [{"symbol": symbol, "dtype": dtype, "size": size}
                                    for dtype, (symbol, size) in plan.integer_arenas.items()]
    manifest.write(result, out)
    return result


def _generate_parallel(graph: Graph, out: Path, prefix: str, c_file: str, h_file: str, param_files, banner: str,
                       symbols: dict, cores: int, schedule: list[list[dict]], omit_wait: str | None,
                       generator: dict, model: dict, accumulation: dict) -> dict:
    """The parallel variant's files and manifest (``entry`` names core 0's function; ``parallel`` lists all)."""
    from codegen import parallel

    code = parallel.generate(graph, prefix, schedule, cores, symbols, [h_file, param_files.header], banner,
                             omit_wait=omit_wait)
    (out / c_file).write_text(code.text)
    (out / h_file).write_text(code.header)
    entry = code.code_symbols[0]
    result = manifest.build(
        generator=generator, model=model, prefix=prefix, entry=entry,
        signature=f"void {entry}(const float *input, float *output)", c_file=c_file, graph=graph,
        sources=[c_file, *param_files.sources], headers=[h_file, param_files.header],
        code_symbols=code.code_symbols, data_symbols=list(param_files.data_symbols) + code.data_symbols,
        layers=code.layers, accumulation=accumulation)
    result["parallel"] = code.parallel
    manifest.write(result, out)
    return result
