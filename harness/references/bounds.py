"""A derived tolerance: a rigorous bound, per output and input, on how far a correct float32 implementation may be
from the float64 evaluation of the model.

The fixed tolerance (atol 1e-5, rtol 5e-6) is picked, and wrong both ways: an ill-conditioned model (ACAS Xu on
its raw input domain) fails correct code by 1e-2, while on well-conditioned ones defects of 1e-6 pass. Here the
bound follows from the model's weights and each test input, in the manner of Higham (*Accuracy and Stability of
Numerical Algorithms*, ch. 3), for *any* float32 implementation that

- sums dot products, convolutions and pooling windows in any order, fused (FMA) or not: a dot product of
  length n is within ``gamma_n |W| . |x^|`` of the exact one (``gamma_n = n u / (1 - n u)``);
- calls a libm within the ulp ``libm_ulp.toml`` documents (expf, tanhf), and computes sigmoid, softmax and
  batch normalisation by their textbook formulas (sigmoid ``1 / (1 + exp(-x))``, softmax with or without the
  max subtracted, batch normalisation folded or not);
- stores the file's float32 weights exactly.

``u`` is 2^-24 + 2^-53: the float64 yardstick's own rounding is inside the bound, so ``|C - f64| <= bound``
holds for correct code. Two passes over the model's ONNX graph, on a batch of inputs:

1. **A priori** (forward): every tensor ``t`` gets its float64 value and ``e(t) >= |t^ - t|``, the worst-case
   error of its float32 value: the error carried in through the op (``|W| . e(x)`` for a dot product, the
   Lipschitz constant of an activation on ``[x - e, x + e]``, nothing for an input of a ReLU below ``-e``)
   plus the op's own rounding (its *local* error ``d(t)``). Rigorous, and loose on deep networks: the carried
   error grows by ``|| |W| ||`` per layer, ignoring every cancellation.
2. **Sensitivity** (reverse): the output error is the sum over ops of the local rounding ``d(t)`` carried to
   the output by the rest of the network; by the mean-value theorem that carriage is the rest's Jacobian at
   some point of the box ``[t - e, t + e]`` the a-priori pass proved. The reverse pass carries, for each
   output, that Jacobian as an interval (centre and radius: a ReLU whose input box straddles 0 has slope
   [0, 1], a max-pool window whose top two values are within their errors routes to both, tanh's slope is
   ``1 - tanh^2`` over the box), and bound = sum over tensors of ``(|centre| + radius) . d(t)``.
   The radius grows with the boxes, and is carried back through ``|W|``: a wide box near the output costs the
   whole bound its cancellations. So the input of an op whose reverse rule widens with its box (``REFINED``:
   softmax, ReLU, the other activations) is narrowed as soon as the forward pass has computed it: the same
   reverse pass, run from each of its elements, bounds its error, and the smaller of that and the a-priori
   error replaces it (rigorous for the same reason: the earlier boxes hold). Every later op then starts from
   the narrowed error, forward and back, so the a-priori errors of the layers after it stop growing too. Only
   where it is cheap (``_Propagator._cheap``): at most ``NARROW_LIMIT`` elements per input, and either no
   convolution before it (passes through dense layers are a few matrix products) or no more elements than the
   output (at most the output's own cost: a classifier's logits, not an attention softmax). Measured
   (docs/benchmarks.md): on LeNet-5 the logits' a-priori error (6e-3) made the softmax's Jacobian radius 90% of
   the output bound, and narrowing them lowers the bound 11 times at the median; on the 7 x 200 ReLU network
   acas-reg200, whose a-priori error grows tenfold a layer until most ReLUs of the last layers straddle 0,
   narrowing every layer lowers it about 3000 times. A convolution's output is left a priori: on LeNet-5 its
   tanh inputs gain 5% for 60 times the time.

**A declared order** tightens the dot products' own rounding. A generator whose manifest declares its order of
accumulation (``Order``: one float32 accumulator from 0.0, the products added in ascending order of the
contracted index, convolution taps in a named nest order, the bias added last) has each dot product bounded by
the running error of that order instead of any order's: the sum over the steps of half a float32 ulp of a bound
on each partial sum ``s_k`` and each product ``p_k`` (at most ``u sum_k (|s_k| + |p_k|)``), bounded from their
float64 values and carried errors (Higham, §3.1 and the running error analysis of §3.3). Partial sums of mixed
signs grow like sqrt(k), not k: the median output bound of acas-reg200, lenet5 and cifarnet falls 125, 66 and 119
times (acas-reg50's 8 times: its narrowed boxes already keep the any-order bound small; docs/benchmarks.md). The
declaration can only make the bound smaller: a false one may fail correct code, never pass a defect the any-order
bound fails, so the oracle may take it from the code under test. A dot product the declaration does not settle
with certainty (a vector that is neither a dense layer's output, the model's input nor a flattened image of a
declared flattening order; a 1-D or 3-D convolution; weights computed at run time) keeps the any-order bound.

Both are rigorous; the bound is the smaller of the two, per output (on the zoo the sensitivity bound is 100 to
10 000 times tighter: benchmarks/tolerance.py). Every op Assay's generators accept has both rules but LRN; an op
with no rule is named in ``Derivation.missing``, and the semantic stage then falls back to the fixed tolerance for
that model, visibly.

A bound that is infinite, NaN or negative somewhere is never a number to compare with: ``Derivation.broken`` names
the op and the tensor from which it is not finite and the cause (``_Watch``), and the semantic stage makes such a
record an error of the oracle. On a deep convolutional network the a-priori error, a box per element that loses
every cancellation, grows a few times per convolution until it exceeds the values themselves; from there every
activation's box straddles its kinks and the softmax's rules give no finite bound (keras.applications' ResNet-50
and DenseNet-121 at 32 x 32, MobileNetV2 at 96 x 96). Both passes run with numpy's warnings off, and a reverse
rule's undefined slope (inf - inf, 0 x inf) is taken as [-inf, inf] (``_interval``), so that no NaN is ever made
and none reaches the user as a warning.

The graph is the model's ONNX file (its own, or Assay's export of its Keras file, which the semantic stage
checks against Keras first). ``layer_tolerances`` gives the bound of named intermediate tensors (a priori, or
narrowed where ``REFINED`` narrowed it). ``local_bounds`` gives the layer-local figures (the semantic stage's
layer-local verdict and the evidence stage's per-layer requirements): the same forward pass, each named tensor's
value replaced, once computed, by the C's float32 value of it with error 0, so that each layer is evaluated from the
C's own input to it and bounded for its own rounding alone, tight however deep the layer.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model
from harness.references import check_inputs
from harness.references import float64
from harness.tensors import convert, shape_in

U32 = 2.0 ** -24  # float32 unit roundoff
U64 = 2.0 ** -53  # float64 unit roundoff
U = U32 + U64  # with the float64 yardstick's own rounding
ULP_BELOW_ONE = 2.0 ** -24  # the ulp of a float32 in [0.5, 1): every ulp of a result in (-1, 1) is at most this
TINY = 2.0 ** -149  # the smallest float32 subnormal: the absolute error of an underflowing exp
LIBM_TABLE = Path(__file__).with_name("libm_ulp.toml")
BATCH = 64
# ops whose reverse rule widens with their input's box: that box is narrowed by the sensitivity pass before it is
# used (``_Propagator.run``), when the narrowing is cheap (``NARROW_LIMIT``)
REFINED = ("Softmax", "Relu", "LeakyRelu", "Clip", "HardSigmoid", "Tanh", "Sigmoid")
NARROW_LIMIT = 256  # elements per input of a narrowed tensor that no convolution precedes (``_Propagator.run``)
SAFETY = 1 + 2.0 ** -20  # the bound's own float64 arithmetic (sums of up to millions of terms) rounds too


def gamma(n: int | np.ndarray, unit: float = U) -> float | np.ndarray:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of n roundings (a sum of n + 1 terms); ``unit``
    the unit roundoff (``U64`` for the float64 yardstick's own sums)."""
    nu = np.asarray(n, np.float64) * unit
    if np.any(nu >= 1):
        raise ValueError(f"gamma_{n} is undefined: n u >= 1")
    return nu / (1 - nu)


@functools.cache
def libm_ulp() -> dict[str, float]:
    """The ulp error from the exact result of each float32 math function: its documented figure
    (``libm_ulp.toml``, validated: from the correctly rounded result, glibc's convention) plus the half ulp by
    which that rounded result may itself miss the exact value."""
    try:
        table = tomllib.loads(LIBM_TABLE.read_text())["ulp"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as error:
        raise ModelError(f"{LIBM_TABLE}: cannot read the [ulp] table ({error})") from None
    needed = {"exp", "tanh", "sqrt", "erf", "log", "log1p", "expm1"}
    if set(table) != needed or not all(isinstance(v, (int, float)) and v >= 0 for v in table.values()):
        raise ModelError(f"{LIBM_TABLE}: [ulp] must give a number >= 0 for exactly {', '.join(sorted(needed))}, "
                         f"has {table}")
    return {name: float(value) + 0.5 for name, value in table.items()}


def exp_relative() -> float:
    """The relative error of expf: k ulp of a result y is at most k 2^-23 |y|; plus u for float64's own."""
    return libm_ulp()["exp"] * 2 * U32 + U


@dataclass(frozen=True)
class Order:
    """A generator's declared order of accumulation (manifest key ``accumulation``, docs/manifest.md).

    ``conv_taps``: the nest orders of a convolution's taps, letters ``I`` (input channel of the group), ``H``,
    ``W`` outermost first (``HWI`` for Keras kernels, ``IHW`` for ONNX's), one per kind of convolution the code
    holds; ``flatten``: the axis orders of the images the code flattens before a dense layer (``HWC`` or ``CHW``).
    The bound takes the largest over the orders listed, so it holds for each."""

    conv_taps: tuple[str, ...] = ()
    flatten: tuple[str, ...] = ()

    RULE = "sequential"
    TAPS = ("HWI", "IHW", "HIW", "WHI", "IWH", "WIH")
    LAYOUTS = ("HWC", "CHW")

    def __post_init__(self):
        object.__setattr__(self, "conv_taps", tuple(sorted(set(self.conv_taps))))
        object.__setattr__(self, "flatten", tuple(sorted(set(self.flatten))))

    def key(self) -> str:
        """The declaration as text, for the cache key of a bound derived with it."""
        return f"{self.RULE};taps={','.join(self.conv_taps)};flatten={','.join(self.flatten)}"

    @classmethod
    def from_manifest(cls, manifest: dict) -> "Order | None":
        """The order a manifest declares, None when it declares none; a malformed declaration is a ModelError
        naming the key (the code's manifest is data from the generator, checked like any input)."""
        record = manifest.get("accumulation")
        if record is None:
            return None
        if not isinstance(record, dict) or record.get("rule") != cls.RULE:
            raise ModelError(f"manifest: accumulation must be {{\"rule\": \"{cls.RULE}\", ...}}, not {record!r}")
        taps, flatten = record.get("conv_taps", []), record.get("flatten", [])
        for key, values, allowed in (("conv_taps", taps, cls.TAPS), ("flatten", flatten, cls.LAYOUTS)):
            if not isinstance(values, list) or any(v not in allowed for v in values):
                raise ModelError(f"manifest: accumulation.{key} must list some of {', '.join(allowed)}, "
                                 f"not {values!r}")
        return cls(tuple(taps), tuple(flatten))


@dataclass(frozen=True)
class Derivation:
    """The bound of one model on a batch of inputs: ``bound`` (N, *output_shape), canonical layout, or None when
    some op has no rule (``missing`` names them); ``broken`` why some element of it is infinite, NaN or negative
    (the op and tensor; never to be compared with), ``broken_input`` the first such input; ``apriori`` the forward
    pass's alone (from the narrowed boxes where ``REFINED`` narrowed them); ``exact`` the graph's float64 outputs;
    ``layers`` the bound of each tensor asked for (a priori, or the sensitivity pass's for a tensor it narrows:
    ``REFINED``), (N, size) in the graph's own layout (None for a tensor the graph lacks)."""

    bound: np.ndarray | None
    apriori: np.ndarray | None
    exact: np.ndarray | None
    missing: tuple[str, ...] = ()
    layers: dict[str, np.ndarray | None] = field(default_factory=dict)
    broken: str | None = None  # why some element of ``bound`` is infinite, NaN or negative: the op and the tensor
    broken_input: int | None = None  # the first input whose bound is so


def missing_rules(model: Model) -> tuple[str, ...]:
    """The ops of the model's ONNX graph that have no bound rule (with the attribute that lacks one); for a model of
    several inputs or outputs (packed, ``Model.inputs``), which the propagation does not follow, that fact."""
    if model.is_packed:
        return (f"a model of {len(model.inputs)} inputs and {len(model.outputs)} outputs",)
    return _Propagator.of(model).missing


def derive(model: Model, inputs: np.ndarray, tensors: tuple[str, ...] = (), order: Order | None = None
           ) -> Derivation:
    """The derived bound of every output of ``model`` for each of ``inputs`` (canonical layout, float32), for any
    order of accumulation, or for the one ``order`` declares (module docstring)."""
    missing = missing_rules(model)
    if missing:
        return Derivation(None, None, None, missing, {t: None for t in tensors})
    parts: dict[str, list] = {"value": [], "apriori": [], "bound": []}
    layers: dict[str, list] = {t: [] for t in tensors}
    broken = broken_input = None
    for start, size, chunk, pass_ in _passes(model, inputs, tensors, order):
        for key in parts:
            parts[key].append(np.asarray(getattr(pass_, key)).reshape(len(chunk), -1)[:size])
        usable = (np.isfinite(parts["bound"][-1]) & (parts["bound"][-1] >= 0)).all(axis=1)
        if broken is None and not usable.all():  # the first input whose bound is unusable, and why
            broken, broken_input = pass_.broken, start + int(np.argmin(usable))
        for name in tensors:
            value = pass_.named[name]
            layers[name].append(None if value is None else value.reshape(len(chunk), -1)[:size])
    out_layout = model.layouts_of("onnx")[1]
    expected = shape_in(model.output_shape, model.output_layout, out_layout)

    def canonical(chunks: list[np.ndarray]) -> np.ndarray:
        whole = np.concatenate(chunks) if chunks else np.zeros((0, int(np.prod(expected))))
        return convert(whole.reshape(len(inputs), *expected), out_layout, model.output_layout)

    stacked = {name: (None if not chunks or chunks[0] is None else np.concatenate(chunks))
               for name, chunks in layers.items()}
    return Derivation(canonical(parts["bound"]), canonical(parts["apriori"]), canonical(parts["value"]), (),
                      stacked, broken, broken_input)


def _passes(model: Model, inputs: np.ndarray, tensors: tuple[str, ...], order: Order | None,
            seeds: dict[str, np.ndarray] | None = None):
    """Both passes (``_Propagator.run``) over ``inputs`` (canonical layout) a chunk at a time: (the chunk's first
    row, its number of inputs, the chunk as run, its ``_Pass``); ``seeds`` (graph tensor -> (N, size) values in the
    graph's layout) cut to the same rows."""
    propagator = _Propagator.of(model)
    in_layout = model.layouts_of("onnx")[0]
    batch = convert(check_inputs(model, inputs), model.layout, in_layout).astype(np.float64)
    one_at_a_time = propagator.rank == batch.ndim - 1  # no batch axis (docs/zoo.md)
    # a graph whose batch is a literal (ShuffleNet's Reshape to (1, 4, 28, 56, 56)) runs in chunks of that size, the
    # last one zero-padded, as the float32 references run it (``onnxruntime_ref.run_batched``)
    step = 1 if one_at_a_time else propagator.fixed_batch or BATCH

    def padded(array: np.ndarray, start: int) -> np.ndarray:
        chunk = array[start:start + step]
        if not one_at_a_time and propagator.fixed_batch and len(chunk) < step:
            chunk = np.concatenate([chunk, np.zeros((step - len(chunk), *chunk.shape[1:]), chunk.dtype)])
        return chunk

    for start in range(0, len(batch), step):
        chunk = padded(batch, start)
        cut = {name: padded(np.asarray(values, np.float64), start) for name, values in (seeds or {}).items()}
        yield start, min(step, len(batch) - start), chunk, propagator.run(
            chunk[0] if one_at_a_time else chunk, tensors, batched=not one_at_a_time, order=order, seeds=cut)


def local_bounds(model: Model, inputs: np.ndarray, seeds: dict[str, np.ndarray], order: Order | None = None
                 ) -> dict[str, tuple[np.ndarray, np.ndarray] | None]:
    """The layer-local figures (docs/semantic.md, "Layer-local verdict"): each tensor of ``seeds`` (a tensor of the
    model's ONNX graph -> the C's float32 values of it for each of ``inputs``, (N, size) in the graph's layout)
    evaluated in float64 from the seeded values of the tensors before it (the C's own input to its layer), and the
    a-priori bound of the rounding of the ops between them alone: (value, bound), both (N, size) in the graph's
    layout; None for a tensor the graph lacks or whose size is not the seed's. Every tensor's error restarts at 0
    from its seed, so no layer's rounding is carried into the next: each layer's bound holds for any correct float32
    implementation of that layer, given its input, in the order ``order`` declares (any order without one). A
    ModelError names the ops without a rule."""
    missing = missing_rules(model)
    if missing:
        raise ModelError(f"{model.name}: no derived bound for {', '.join(missing)}")
    found: dict[str, list] = {name: [] for name in seeds}
    for _start, size, chunk, pass_ in _passes(model, inputs, (), order, seeds):
        for name in seeds:
            pair = pass_.local.get(name)
            found[name].append(None if pair is None else tuple(a.reshape(len(chunk), -1)[:size] for a in pair))
    return {name: None if any(pair is None for pair in pairs) else
            (np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs]))
            for name, pairs in found.items()}


def layer_tolerances(model: Model, inputs: np.ndarray, tensors: list[str], order: Order | None = None
                     ) -> list[np.ndarray | None]:
    """For the evidence stage's per-layer low-level requirements: for each named tensor of the model's ONNX
    graph (a node output, as ``onnxruntime_ref.layer_outputs`` names them), an (N, size) float64 array bounding
    |float32 value - exact value| for each input (the a-priori bound, or the sensitivity bound where
    ``REFINED`` narrowed the tensor: rigorous for the layer whatever follows it), in the graph's own layout;
    None for a tensor the graph does not have. A ModelError names the ops without a rule when the bound cannot be
    derived."""
    derivation = derive(model, inputs, tuple(tensors), order)
    if derivation.missing:
        raise ModelError(f"{model.name}: no derived bound for {', '.join(derivation.missing)}")
    return [derivation.layers[name] for name in tensors]


# --- the two passes ----------------------------------------------------------------------------------

# forward: (p, args, errors, attrs, y) -> (carried, local), e(y) = carried + local
Forward = Callable[["_Propagator", list, list, dict, np.ndarray], tuple]
# reverse: (p, args, errors, attrs, y, centre, radius) -> [(centre, radius) or None per input]
Reverse = Callable[["_Propagator", list, list, dict, np.ndarray, np.ndarray, np.ndarray], list]
_FORWARD: dict[str, Forward] = {}
_REVERSE: dict[str, Reverse] = {}


def _forward(*ops: str):
    def register(function: Forward) -> Forward:
        for op in ops:
            _FORWARD[op] = function
        return function

    return register


def _reverse(*ops: str):
    def register(function: Reverse) -> Reverse:
        for op in ops:
            _REVERSE[op] = function
        return function

    return register


@dataclass
class _Pass:
    value: np.ndarray  # the graph's float64 output
    apriori: np.ndarray  # e(output)
    bound: np.ndarray  # min(a priori, sensitivity)
    named: dict
    broken: str | None = None  # why some element of ``bound`` is not a finite number >= 0 (``_Watch.explain``)
    local: dict = field(default_factory=dict)  # a seeded tensor -> (its value, its a-priori error) before the seed


class _Output:
    """One output of a node of several (Split's parts), as a step of the passes: the node's op, inputs and attributes,
    this output alone, and which of the node's outputs it is (``part``, read by the op's reverse rule)."""

    def __init__(self, node, part: int):
        self.op_type, self.input, self.attribute = node.op_type, node.input, node.attribute
        self.output, self.part = [node.output[part]], part


class _Watch:
    """Where a pass's figures stop being usable, to name the op and the tensor when the bound is infinite, NaN or
    negative (never compared, ``derive``'s ``broken``): the first node whose a-priori error is not a finite number
    >= 0, the first whose a-priori error exceeds the largest magnitude of its own values (from there on the
    forward pass proves nothing about signs, so every later activation's box straddles its kinks), and, per
    sensitivity pass, the node nearest the output whose rounding carried to the output is not finite."""

    def __init__(self):
        self.infinite: str | None = None
        self.vacuous: str | None = None
        self.unbounded: str | None = None

    @staticmethod
    def _name(node) -> str:
        return f"{node.op_type} '{node.output[0]}'"

    def forward(self, node, value: np.ndarray, error: np.ndarray) -> None:
        if self.infinite is None and not (np.isfinite(error).all() and (error >= 0).all()):
            self.infinite = self._name(node)
        if self.vacuous is None and np.isfinite(value).all() \
                and np.max(error, initial=0.0) > np.abs(value).max(initial=0.0) > 0:
            self.vacuous = f"{self._name(node)} ({np.max(error):.3g} against values up to {np.abs(value).max():.3g})"

    def reverse(self, node, weight: np.ndarray) -> None:
        if self.unbounded is None and not np.isfinite(weight).all():
            self.unbounded = self._name(node)

    def explain(self, output: str) -> str:
        """One sentence: the op and tensor where the bound of ``output`` stops being finite, and why."""
        where = self.infinite or f"the output '{output}'"
        parts = [f"no finite derived bound from {where} on"]
        if self.vacuous:
            parts.append(f"the a-priori error exceeds the values themselves from {self.vacuous} on, every later "
                         f"activation's box straddling its kinks")
        if self.unbounded:
            parts.append(f"the sensitivity pass carries the rounding of {self.unbounded} to it unbounded")
        return "; ".join(parts)


class _Propagator:
    """The model's float64 graph, run node by node on (value, error) pairs, then back on sensitivities."""

    def __init__(self, proto):
        self.evaluator = float64.Evaluator(proto)
        self.lock = threading.Lock()  # one pass at a time (``run``)
        self.current = ""  # the op being propagated, for the rules several ops share
        self.proto = None  # the node being propagated forward (its producers: ``contraction_order``)
        self.order: Order | None = None  # the declared order of accumulation of this pass, if any
        self.node = ""  # the output of the node being propagated back (``_memo``)
        self.part = 0  # which of its node's outputs it is (``_Output``: Split's parts)
        self.watch = _Watch()  # where this pass's figures stop being finite (``run`` starts a new one)
        self.memo: dict = {}  # per node, what its reverse rule computes alike for every output element
        self.opset = self.evaluator.opset
        first = self.evaluator.inputs[0]
        self.input_name = first.name
        dims = first.type.tensor_type.shape.dim
        self.rank = len(dims)
        self.fixed_batch = dims[0].dim_value if dims and dims[0].HasField("dim_value") and dims[0].dim_value > 0 \
            else None
        self.missing = tuple(sorted({why for node in self.evaluator.graph.node
                                     if (why := _unsupported(node)) is not None}))
        self.reversible = all(_reversible(node, self.evaluator.constants) for node in self.evaluator.graph.node
                              if node.op_type not in CONSTANT_OPS)
        self.producer = {name: node for node in self.evaluator.graph.node for name in node.output}
        # a dot product whose output a batch normalisation reads may be computed with the scale folded into its
        # weights: one more rounding per product (codegen's fold-bn)
        self.folded = {node.input[0] for node in self.evaluator.graph.node if node.op_type == "BatchNormalization"}
        # the inputs of the ops whose reverse rule widens with their box: a softmax's (its Jacobian's radius grows
        # like e^{4D} - 1 with the largest a-priori error D of its row, which on LeNet-5 is most of the bound), a
        # ReLU's (slope [0, 1] where the box straddles 0: most of a deep dense network's bound), an activation's
        # (its slope's range over the box)
        self.refined = {node.input[0] for node in self.evaluator.graph.node if node.op_type in REFINED}
        # the output's static shape (0 for a dimension that is not), batch axis included when the graph has one
        self.output_dims = [d.dim_value for d in self.evaluator.graph.output[0].type.tensor_type.shape.dim]

    @staticmethod
    def of(model: Model) -> "_Propagator":
        path = Path(model.file("onnx")).resolve()
        return _propagator(str(path), path.stat().st_mtime_ns)

    def run(self, batch: np.ndarray, tensors: tuple[str, ...], batched: bool = True, order: Order | None = None,
            seeds: dict[str, np.ndarray] | None = None) -> _Pass:
        """``_pass``, one at a time: the propagator is shared (``_propagator``'s cache) and keeps the pass's state
        on itself (``order``, ``shapes``, ``watch``, the node being propagated), which two threads' passes would mix
        (``assay mutate`` judges mutants layer by layer in threads beside the weight mutants' search: a KeyError,
        or another pass's figures)."""
        with self.lock:
            return self._pass(batch, tensors, batched, order, seeds)

    def _pass(self, batch: np.ndarray, tensors: tuple[str, ...], batched: bool, order: Order | None,
              seeds: dict[str, np.ndarray] | None) -> _Pass:
        """Both passes on ``batch``: inputs along its first axis when ``batched``, else one input. A tensor of
        ``seeds`` (values of the same size), once computed, has its value and a-priori error kept in ``local`` and
        is then replaced by the seed, exact (error 0): the layer-local figures (``local_bounds``), a priori alone
        (the sensitivity pass would carry the rounding of the ops before a seed, which the seed has cut off)."""
        seeds = seeds or {}
        kept: dict[str, tuple | None] = {}
        from onnx import helper

        ev = self.evaluator
        values = dict(ev.constants)
        errors: dict[str, np.ndarray | None] = {name: None for name in ev.constants}
        values[self.input_name], errors[self.input_name] = batch, np.zeros_like(batch)
        local: dict[str, np.ndarray] = {}
        steps = []
        self.order, self.shapes = order, {name: np.shape(value) for name, value in values.items()}
        self.watch = _Watch()
        # a figure that overflows or is undefined is named below (``_Pass.broken``), never a warning on the user's
        # terminal: an error of the oracle, not a comparison
        with np.errstate(all="ignore"):
            convolved = False  # a convolution precedes: the reverse passes through it are costly
            for node in ev.graph.node:
                args = [values[name] if name else None for name in node.input]
                errs = [errors.get(name) if name else None for name in node.input]
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                result = float64._OPS[node.op_type](ev, args, attrs)
                ys = [np.asarray(part) for part in (result if isinstance(result, tuple) else (result,))]
                for name, y in zip(node.output, ys):
                    values[name], self.shapes[name] = y, y.shape
                if not np.issubdtype(ys[0].dtype, np.floating) or all(e is None for e in errs):
                    errors.update({name: None for name in node.output})  # from constants alone (shapes, folded weights)
                    continue
                self.current, self.proto = node.op_type, node
                # an op of several outputs (Split) gives one (carried, local) pair per output
                pairs = _FORWARD[node.op_type](self, args, errs, attrs, ys[0] if len(ys) == 1 else ys)
                for part, (name, y, (carried, own)) in enumerate(zip(node.output, ys, [pairs] if len(ys) == 1
                                                                      else pairs)):
                    step = node if len(ys) == 1 else _Output(node, part)
                    local[name] = np.broadcast_to(own, y.shape)
                    errors[name] = np.broadcast_to(carried + own, y.shape)
                    self.watch.forward(step, y, errors[name])
                    steps.append((step, args, errs, attrs, y))
                convolved = convolved or node.op_type in ("Conv", "ConvTranspose")
                name, y = node.output[0], ys[0]
                if not seeds and self.reversible and name in self.refined and self._cheap(y, batched, convolved):
                    # narrowed before any later op reads it: every later box, and the forward errors, start from it
                    errors[name] = np.minimum(errors[name], self._sensitivity(steps, local, name, y, batched) * SAFETY)
                for name in (name for name in node.output if name in seeds):
                    seed = seeds[name]
                    if seed.size != values[name].size:
                        kept[name] = None
                        continue
                    kept[name] = (values[name], errors[name] * SAFETY)
                    values[name] = seed.reshape(np.shape(values[name]))
                    errors[name] = np.zeros(np.shape(values[name]))
            output = ev.graph.output[0].name
            apriori = errors[output] * SAFETY
            bound = apriori
            if self.reversible and not seeds:
                self.watch.unbounded = None  # the narrowing passes' own are not the output's
                bound = np.minimum(apriori, self._sensitivity(steps, local, output, values[output], batched) * SAFETY)
            broken = None if (np.isfinite(bound) & (bound >= 0)).all() else self.watch.explain(output)
        return _Pass(values[output], apriori, bound,
                     {name: None if errors.get(name) is None else errors[name] * SAFETY for name in tensors}, broken,
                     kept)

    def _cheap(self, value: np.ndarray, batched: bool, convolved: bool) -> bool:
        """Whether narrowing the tensor ``value`` is cheap: one reverse pass per element, through the steps before
        it. At most ``NARROW_LIMIT`` elements per input, and either no convolution before it (a pass through dense
        layers is a few matrix products) or no more elements than the network's output (at most the output's own
        cost: a classifier's logits, not an attention softmax inside the network)."""
        size = value[0].size if batched else value.size
        output = math.prod(self.output_dims[1:] if batched else self.output_dims)  # 0 when a dimension is not static
        return size <= NARROW_LIMIT and (not convolved or size <= output)

    def _sensitivity(self, steps: list, local: dict, target: str, value: np.ndarray, batched: bool) -> np.ndarray:
        """Per element of tensor ``target`` (``value``), the sum over the tensors before it of (|centre| + radius) .
        local rounding (module docstring): one reverse pass per element, for every input of the batch at once, each
        tensor's box being its error as ``run`` left it (narrowed where it was narrowed)."""
        self.memo = {}  # per node, what its reverse rule computes alike for every element
        flat = value.reshape(len(value), -1) if batched else value.reshape(1, -1)
        bound = np.zeros(flat.shape)
        for k in range(flat.shape[1]):
            seed = np.zeros(flat.shape)
            seed[:, k] = 1.0
            grads = {target: (seed.reshape(value.shape), np.zeros(value.shape))}
            total = np.zeros(len(flat))
            for node, args, errs, attrs, y in reversed(steps):
                name = node.output[0]
                if name not in grads:
                    continue
                centre, radius = grads.pop(name)
                weight = _product(np.abs(centre) + radius, local[name])
                self.watch.reverse(node, weight)
                total += weight.reshape(len(flat), -1).sum(axis=1) if batched else weight.sum()
                self.current, self.node, self.part = node.op_type, name, getattr(node, "part", 0)
                for input_name, err, grad in zip(node.input, errs,
                                                 _REVERSE[node.op_type](self, args, errs, attrs, y, centre, radius)):
                    if grad is None or err is None or not input_name:
                        continue
                    if input_name in grads:
                        c0, r0 = grads[input_name]
                        grad = (c0 + grad[0], r0 + grad[1])
                    grads[input_name] = _interval(*grad)
            bound[:, k] = total
        return bound.reshape(value.shape)


@functools.lru_cache(maxsize=8)
def _propagator(path: str, mtime_ns: int) -> _Propagator:
    import onnx

    return _Propagator(float64.to_float64(onnx.load(path)))


CONSTANT_OPS = ("Constant", "ConstantOfShape")  # made from constants alone: no error to bound


def _unsupported(node) -> str | None:
    """Why ``node`` has no bound rule (its op, or its op and attribute), or None when it has one."""
    from onnx import helper

    if node.op_type in CONSTANT_OPS:
        return None
    if node.op_type not in _FORWARD:
        return node.op_type
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if node.op_type == "Pad" and mode not in ("constant", "reflect", "edge"):
        return f"Pad mode={mode}"
    return None


def _reversible(node, constants: dict) -> bool:
    """Whether the sensitivity pass has a rule for ``node`` (else the model keeps its a-priori bound): not for a
    convolution or PRelu whose weights or slope are computed (their reverse rules take them as constants)."""
    from onnx import helper

    if node.op_type in ("Conv", "ConvTranspose", "PRelu") and node.input[1] not in constants:
        return False
    if node.op_type == "Pad":
        mode = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "mode"), b"constant")
        return (mode.decode() if isinstance(mode, bytes) else mode) == "constant"
    return node.op_type in _REVERSE


def _zero(error, like) -> np.ndarray:
    return np.zeros(np.shape(like)) if error is None else error


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b of two arrays >= 0 where an exact zero of either is zero, infinities included: a rounding that cannot
    happen (``b`` 0, an exact op) or that cannot reach the output (``a`` 0) adds nothing, however wide the other."""
    with np.errstate(invalid="ignore"):
        return np.where((a == 0) | (b == 0), 0.0, a * b)


def _interval(centre: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A reverse rule's (centre, radius) made sound where its arithmetic was not (inf - inf, 0 * inf): an undefined
    slope is [-inf, inf], centre 0 and an infinite radius, which ``_product`` and ``_Watch`` then carry and name."""
    undefined = np.isnan(centre) | np.isnan(radius)
    if not undefined.any():
        return centre, radius
    return np.where(undefined, 0.0, centre), np.where(undefined, np.inf, radius)


def _unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """A gradient of a broadcast result summed back to an operand's ``shape``."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


def _memo(p, compute):
    """``compute()`` once per node of a sensitivity pass (the same for every output element)."""
    if p.node not in p.memo:
        p.memo[p.node] = compute()
    return p.memo[p.node]


def _elementwise(slope_low: np.ndarray, slope_high: np.ndarray, centre, radius) -> list:
    """The reverse step of y = f(x) elementwise, f's slope over the box within [low, high]."""
    mid, half = (slope_low + slope_high) / 2, (slope_high - slope_low) / 2
    return [(centre * mid, np.abs(centre) * half + radius * np.maximum(np.abs(slope_low), np.abs(slope_high)))]


# --- ops that only move values --------------------------------------------------------------------------

STRUCTURAL = ("Identity", "Dropout", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Pad",
              "Slice", "Split", "Gather", "Cast", "CastLike")
# ops that keep every value and its place, only the shape changes (a cast of a float tensor to float: the spec's)
RESHAPING = ("Identity", "Dropout", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Cast", "CastLike")


@_forward(*STRUCTURAL)
def _structural(p, args, errs, attrs, y):
    """The same op moves the errors (padding has none); an op of several outputs (Split) moves them to each."""
    moved = [_zero(e, a) if a is not None and np.issubdtype(np.asarray(a).dtype, np.floating) else a
             for a, e in zip(args, errs)]
    if p.current == "Pad":  # the padding value is exact: zero error (an input from opset 11, else an attribute)
        moved[2:3] = [None if a is None else np.zeros_like(np.asarray(a)) for a in moved[2:3]]
        attrs = {**attrs, "value": 0.0} if "value" in attrs else attrs
    result = float64._OPS[p.current](p.evaluator, moved, attrs)
    if isinstance(result, tuple) and isinstance(y, list):
        return [(np.asarray(part, np.float64), 0.0) for part in result]
    return np.asarray(result[0] if isinstance(result, tuple) else result, np.float64), 0.0


@_reverse(*STRUCTURAL)
def _structural_back(p, args, errs, attrs, y, centre, radius):
    x = args[0]
    op = p.current
    if op in RESHAPING:
        return [(centre.reshape(x.shape), radius.reshape(x.shape))]
    if op in ("Slice", "Split", "Gather"):  # each output cell is one input cell: the gradient goes back to it
        return [tuple(_gather_back(p, args, attrs, g) for g in (centre, radius))] + [None] * (len(args) - 1)
    if op == "Transpose":
        perm = attrs.get("perm") or list(range(x.ndim))[::-1]
        inverse = np.argsort(perm)
        return [(centre.transpose(inverse), radius.transpose(inverse))]
    if op == "Concat":
        axis = attrs["axis"] % y.ndim
        cuts = np.cumsum([a.shape[axis] for a in args])[:-1]
        return list(zip(np.split(centre, cuts, axis=axis), np.split(radius, cuts, axis=axis)))
    # Pad, constant mode (``_reversible``): the input's cells are a slice of the output
    pads = attrs["pads"] if p.opset < 11 else [int(v) for v in args[1]]
    axes = list(range(x.ndim)) if p.opset < 11 or len(args) < 4 or args[3] is None \
        else [int(a) % x.ndim for a in args[3]]
    begin = [0] * x.ndim
    for i, axis in enumerate(axes):
        begin[axis] = pads[i]
    inside = tuple(slice(b, b + s) for b, s in zip(begin, x.shape))
    return [(centre[inside], radius[inside])] + [None] * (len(args) - 1)


# --- exact, 1-Lipschitz ops ------------------------------------------------------------------------------


@_forward("Relu")
def _relu(p, args, errs, attrs, y):
    e = _zero(errs[0], args[0])  # x < -e: the exact and the float32 input both negative, both outputs 0
    return np.where(args[0] < -e, 0.0, e), 0.0


@_reverse("Relu")
def _relu_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    return _elementwise(*_memo(p, lambda: (np.where(x > e, 1.0, 0.0), np.where(x < -e, 0.0, 1.0))), centre, radius)


def _clip_range(args, attrs) -> tuple:
    """Clip's (low, high): inputs from opset 11, attributes before; an absent end is infinite."""
    low = args[1] if len(args) > 1 and args[1] is not None else attrs.get("min", -np.inf)
    high = args[2] if len(args) > 2 and args[2] is not None else attrs.get("max", np.inf)
    return low, high


@_forward("Clip")
def _clip(p, args, errs, attrs, y):
    """1-Lipschitz; an input whose whole box is beyond one end is clamped to it exactly, in float32 and in float64
    alike (as a ReLU's below -e): no error (a ReLU6's saturated half, which would otherwise carry its box on)."""
    x, e = args[0], _zero(errs[0], args[0])
    low, high = _clip_range(args, attrs)
    return np.broadcast_to(np.where((x + e < low) | (x - e > high), 0.0, e), y.shape), 0.0


@_reverse("Clip")
def _clip_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    low, high = _clip_range(args, attrs)
    inside = (x - e > low) & (x + e < high)
    outside = (x + e < low) | (x - e > high)
    return _elementwise(np.where(inside, 1.0, 0.0), np.where(outside, 0.0, 1.0), centre, radius) + [None, None]


@_forward("Max", "Min")
def _extremum(p, args, errs, attrs, y):
    return np.maximum.reduce([np.broadcast_to(_zero(e, a), y.shape) for a, e in zip(args, errs)]), 0.0


@_reverse("Max", "Min")
def _extremum_back(p, args, errs, attrs, y, centre, radius):
    """Each operand that may be the extremum (within its and the extremum's errors) gets the whole gradient as
    radius; a clear winner gets it exactly."""
    e_y = np.maximum.reduce([np.broadcast_to(_zero(e, a), y.shape) for a, e in zip(args, errs)])
    candidates = [np.abs(np.broadcast_to(a, y.shape) - y) <= np.broadcast_to(_zero(e, a), y.shape) + e_y
                  for a, e in zip(args, errs)]
    count = sum(c.astype(int) for c in candidates)
    out = []
    for a, candidate in zip(args, candidates):
        sole = candidate & (count == 1)
        shared = candidate & (count > 1)
        c = np.where(sole, centre, 0.0)
        r = np.where(sole, radius, 0.0) + np.where(shared, np.abs(centre) + radius, 0.0)
        out.append((_unbroadcast(c, np.shape(a)), _unbroadcast(r, np.shape(a))))
    return out


@_forward("MaxPool", "GlobalMaxPool")
def _max_pool(p, args, errs, attrs, y):
    error = _zero(errs[0], args[0])
    if p.current == "GlobalMaxPool":
        return np.max(error, axis=tuple(range(2, error.ndim)), keepdims=True), 0.0
    kernel, strides, dilations, pads = float64._window_attrs(error, attrs, attrs["kernel_shape"])
    windows = float64._windows(error, kernel, strides, dilations, pads, fill=0.0)
    return windows.max(axis=tuple(range(-len(kernel), 0))), 0.0


@_reverse("MaxPool", "GlobalMaxPool")
def _max_pool_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    if p.current == "GlobalMaxPool":
        attrs = {"kernel_shape": list(x.shape[2:])}
    kernel, strides, dilations, pads = float64._window_attrs(x, attrs, attrs["kernel_shape"])

    def candidates():
        xs = float64._windows(x, kernel, strides, dilations, pads, fill=-np.inf)
        es = float64._windows(e, kernel, strides, dilations, pads, fill=0.0)
        top = xs.max(axis=axes, keepdims=True)
        e_top = np.take_along_axis(es.reshape(*es.shape[:-len(kernel)], -1),
                                   xs.reshape(*xs.shape[:-len(kernel)], -1).argmax(axis=-1)[..., None], axis=-1)
        e_top = e_top.reshape(*e_top.shape[:-1], *([1] * len(kernel)))
        candidate = xs >= top - es - e_top
        count = candidate.sum(axis=axes, keepdims=True)
        return candidate & (count == 1), candidate & (count > 1)

    axes = tuple(range(-len(kernel), 0))
    sole, shared = _memo(p, candidates)
    c_out, r_out = centre[(...,) + (None,) * len(kernel)], radius[(...,) + (None,) * len(kernel)]
    c = np.where(sole, c_out, 0.0)
    r = np.where(sole, r_out, 0.0) + np.where(shared, np.abs(c_out) + r_out, 0.0)
    return [(_scatter(c, x.shape, kernel, strides, dilations, pads),
             _scatter(r, x.shape, kernel, strides, dilations, pads))]


def _gather_back(p, args, attrs, grad: np.ndarray) -> np.ndarray:
    """The adjoint of Slice, of Split's output ``p.part`` or of Gather: ``grad`` (of the output) summed onto the
    input cells each output cell was read from (Gather may read one cell several times)."""
    x = args[0]
    out = np.zeros(x.shape)
    if p.current == "Slice":
        out[float64.slice_index(p.evaluator, args, attrs, x.ndim)] = grad
    elif p.current == "Split":
        axis, sizes = float64.split_sizes(p.evaluator, args, attrs, x.shape)
        start = sum(sizes[:p.part])
        out[(slice(None),) * axis + (slice(start, start + sizes[p.part]),)] = grad
    else:
        axis = attrs.get("axis", 0) % x.ndim
        indices = np.asarray(args[1]).astype(np.int64) % x.shape[axis]  # negative indices count from the end
        moved = np.moveaxis(grad, list(range(axis, axis + indices.ndim)), list(range(indices.ndim)))
        np.add.at(np.moveaxis(out, axis, 0), indices, moved)
    return out


def _scatter(per_tap: np.ndarray, shape: tuple, kernel, strides, dilations, pads) -> np.ndarray:
    """The adjoint of ``float64._windows``: sums (N, C, *out, *kernel) values back onto the (N, C, *spatial)
    input they were read from (padding dropped)."""
    spatial = len(kernel)
    padded_shape = [*shape[:2], *(shape[2 + i] + pads[i] + pads[i + spatial] for i in range(spatial))]
    out = np.zeros(padded_shape)
    outs = per_tap.shape[2:2 + spatial]
    for tap in itertools.product(*(range(k) for k in kernel)):
        where = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, outs, strides))
        out[(slice(None), slice(None), *where)] += per_tap[(..., *tap)]
    return out[(slice(None), slice(None), *(slice(pads[i], pads[i] + shape[2 + i]) for i in range(spatial)))]


# --- dot products -------------------------------------------------------------------------------------------


def _leak(p, args, attrs) -> np.ndarray:
    """The slope below 0: LeakyRelu's ``alpha``, or PRelu's slope tensor (a constant: ``_reversible``)."""
    return np.asarray(args[1] if p.current == "PRelu" else attrs.get("alpha", 0.01), np.float64)


@_forward("LeakyRelu", "PRelu")
def _leaky_relu(p, args, errs, attrs, y):
    """Lipschitz max(1, |alpha|); the product alpha x one rounding; a computed slope's error carried by |x|."""
    alpha = np.abs(_leak(p, args, attrs))
    e = _zero(errs[0], args[0])
    carried = np.maximum(1.0, alpha) * e
    if p.current == "PRelu" and errs[1] is not None:
        carried = carried + (np.abs(args[0]) + e) * errs[1]
    return np.broadcast_to(carried, y.shape), U * (np.abs(y) + alpha * e)


@_reverse("LeakyRelu", "PRelu")
def _leaky_relu_back(p, args, errs, attrs, y, centre, radius):
    x, e, alpha = args[0], _zero(errs[0], args[0]), np.broadcast_to(_leak(p, args, attrs), args[0].shape)
    low = np.where(x > e, 1.0, np.where(x < -e, alpha, np.minimum(1.0, alpha)))
    high = np.where(x > e, 1.0, np.where(x < -e, alpha, np.maximum(1.0, alpha)))
    return _elementwise(low, high, centre, radius) + [None] * (len(args) - 1)


@_forward("HardSigmoid")
def _hard_sigmoid(p, args, errs, attrs, y):
    alpha, beta = abs(attrs.get("alpha", 0.2)), abs(attrs.get("beta", 0.5))
    e = _zero(errs[0], args[0])
    return alpha * e, gamma(2) * (alpha * (np.abs(args[0]) + e) + beta)


@_reverse("HardSigmoid")
def _hard_sigmoid_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    ends = (alpha * (x - e), alpha * (x + e))
    low_z, high_z = np.minimum(*ends) + beta, np.maximum(*ends) + beta
    inside = (low_z > 0) & (high_z < 1)
    outside = (high_z < 0) | (low_z > 1)
    return _elementwise(np.where(inside, alpha, 0.0) if alpha >= 0 else np.where(outside, 0.0, alpha),
                        np.where(outside, 0.0, alpha) if alpha >= 0 else np.where(inside, alpha, 0.0), centre, radius)


def _operands(args, errs, attrs):
    a, b = args[0], args[1]
    ea, eb = _zero(errs[0], a), _zero(errs[1], b)
    if attrs.get("transA", 0):
        a, ea = a.T, ea.T
    if attrs.get("transB", 0):
        b, eb = b.T, eb.T
    return a, b, ea, eb


@_forward("MatMul", "Gemm")
def _matrix_product(p, args, errs, attrs, y):
    """|a^ b^ - a b| <= |a| e_b + e_a |b| + e_a e_b carried; gamma_{n (+1 for the bias)} |a^| |b^| local."""
    a, b, ea, eb = _operands(args, errs, attrs)
    carried = np.matmul(np.abs(a), eb) + np.matmul(ea, np.abs(b)) + np.matmul(ea, eb)
    magnitude = np.matmul(np.abs(a) + ea, np.abs(b) + eb)
    n = a.shape[-1] + _folded(p)
    alpha, beta = abs(attrs.get("alpha", 1.0)), abs(attrs.get("beta", 1.0))
    scaled = int(alpha != 1.0) + int(beta != 1.0)
    bias = args[2] if len(args) > 2 else None
    ec = None if bias is None else _zero(errs[2], bias)
    if bias is not None:
        own = gamma(n + 1 + scaled) * (alpha * magnitude + beta * (np.abs(bias) + ec))
    else:
        own = gamma(n + scaled) * alpha * magnitude
    order = _contraction_order(p, a, eb)
    if order is not None:
        running = tuple(part[:, 0] for part in _running_bound(a[:, None, order], ea[:, None, order], b[order], p))
        extra = int(alpha != 1.0) + (0 if bias is None else 1 + int(beta != 1.0))
        own = np.minimum(own, _finish(running, alpha, extra, beta, bias, ec))
    if bias is not None:
        return alpha * carried + beta * ec, own
    return alpha * carried, own


def _folded(p) -> int:
    """1 when the dot product being propagated may carry a folded batch normalisation (one more rounding per
    product), else 0."""
    return int(p.proto.output[0] in p.folded)


def _contraction_order(p, a: np.ndarray, eb: np.ndarray) -> np.ndarray | None:
    """The declared order of a matrix product's contracted index (a permutation of it), or None for any order:
    no declaration, an operand that is not (batch, K) times constant weights, or a vector whose order the
    declaration does not settle. Back from the operand through ops that keep its shape (activations): a dense
    layer's output or the model's input is summed in index order; a flattened (N, C, H, W) image (the graph's
    layout: Assay's export and ONNX's convolutions) in the declared flattening order; anything else, any order."""
    order, node = p.order, p.proto
    if order is None or a.ndim != 2 or np.any(eb) or any(x.name == "transA" and x.i for x in node.attribute):
        return None
    identity, name = np.arange(a.shape[1]), node.input[0]
    source = p.producer.get(name)
    while source is not None and p.shapes.get(source.input[0]) == p.shapes[name]:
        name = source.input[0]
        source = p.producer.get(name)
    if source is None or source.op_type in ("Gemm", "MatMul"):
        return identity
    image = p.shapes.get(source.input[0], ())
    if source.op_type not in ("Flatten", "Reshape") or len(image) != 4:
        return None
    c, h, w = image[1:]
    if h * w == 1 or order.flatten == ("CHW",):
        return identity
    behind = p.producer.get(source.input[0])
    if order.flatten != ("HWC",) or behind is None or behind.op_type == "Transpose":
        return None  # no single declared order, or an image whose axes a Transpose has moved
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()


def _running_bound(a: np.ndarray, ea: np.ndarray, b: np.ndarray, p) -> tuple:
    """The running error bound of summing ``a[n, l, k] * b[k, m]`` over k in ascending order from 0.0, in float32,
    with ``|a^ - a| <= ea`` and ``b`` exact (module docstring): (E, S_K, P), each (N, L, M): the bound on the
    accumulator's error, on |its exact final sum| and on the sum of |products|.

    The accumulator's error is the sum of each step's rounding: ``acc_k - s_k = (acc_{k-1} - s_{k-1}) + (fl(p_k) -
    p_k) + (fl(z_k) - z_k)`` with ``z_k = acc_{k-1} + fl(p_k)``, and a rounding to nearest is within half an ulp
    of its operand: ``|fl(v) - v| <= ulp(V) / 2`` for any ``V >= |v|`` (at most u V; the first addition to 0.0 is
    exact). ``|z_k| <= |s_k| + gamma_k sum_{j<=k} |p_j|`` (the error so far, in any order), ``|s_k|`` bounded from
    the float64 partial sums plus ``sum_{j<=k} ea_j |b_j|`` for the float32 operands; the float64 arithmetic of
    the bound itself and of the yardstick's own sum add ``gamma_K`` (binary64) ``sum_k |p_k|``."""
    n, length, k = a.shape
    m = b.shape[1]
    error, final, products = (np.empty((n, length, m)) for _ in range(3))
    step = max(1, 2_000_000 // max(1, k * m))
    for i in range(n):
        for start in range(0, length, step):
            part = slice(start, start + step)
            exact = a[i, part, :, None] * b
            carried = ea[i, part, :, None] * np.abs(b)
            magnitude = np.abs(exact) + carried
            so_far = np.cumsum(magnitude, axis=1)
            partial = np.abs(np.cumsum(exact, axis=1)) + np.cumsum(carried, axis=1) + gamma(k, U64) * so_far
            operand = (partial + gamma(k) * so_far)[:, 1:]
            total = so_far[:, -1]
            error[i, part] = (_half_ulp(operand).sum(axis=1) + _half_ulp(magnitude).sum(axis=1)
                              + 2 * gamma(k, U64) * total)
            final[i, part], products[i, part] = partial[:, -1], total
    if _folded(p):  # the products of folded weights: u |p_k| more each, the sums scaled alike
        error = error * (1 + gamma(2)) + gamma(1) * (1 + gamma(k)) * products
    return error, final, products


def _half_ulp(v: np.ndarray) -> np.ndarray:
    """Half the float32 ulp at magnitude ``v`` (>= 0), taken a hair above ``v`` so that the float64 arithmetic
    that computed ``v`` cannot move it into the binade below: the largest rounding error of a result of
    magnitude at most ``v`` (2^-150 among subnormals; 0 for an exact zero)."""
    exponent = np.frexp(v * (1 + 2.0 ** -30))[1]  # v in [2^(e-1), 2^e): ulp 2^(e-24)
    return np.where(v > 0, np.ldexp(1.0, np.maximum(exponent - 25, -150)), 0.0)


def _finish(running: tuple, alpha: float, extra: int, beta: float = 1.0, bias: np.ndarray | None = None,
            bias_error: np.ndarray | None = None) -> np.ndarray:
    """The accumulator's bound after ``extra`` roundings of ``alpha acc (+ beta bias)`` (a scaling, the bias's
    scaling, the bias's addition): |alpha| E (1 + gamma_r) + gamma_r (|alpha| |s| + |beta| (|bias| + e_bias))."""
    error, final, _ = running
    if extra == 0:
        return alpha * error
    terms = alpha * (final + error)
    if bias is not None:
        terms = terms + beta * (np.abs(bias) + bias_error)
    return alpha * error * (1 + gamma(extra)) + gamma(extra) * terms


@_reverse("MatMul", "Gemm")
def _matrix_product_back(p, args, errs, attrs, y, centre, radius):
    """d(a b) = da b^ + a db, with b^ in [b - e_b, b + e_b]: the slope for a is an interval (weights: exact)."""
    a, b, ea, eb = _operands(args, errs, attrs)
    alpha = attrs.get("alpha", 1.0)
    grads: list = [None, None]
    if errs[0] is not None:
        c2, r2 = (centre, radius) if b.ndim > 1 else (centre[..., None], radius[..., None])
        if a.ndim == 1:  # numpy promotes a vector a to [1, K] and squeezes that axis from the product
            c2, r2 = c2[..., None, :], r2[..., None, :]

        def transposed() -> tuple:  # b^T, (|b| + e_b)^T, and e_b^T unless b is exact (weights): once per node
            b2, eb2 = (b, eb) if b.ndim > 1 else (b[:, None], eb[:, None])
            return (b2.swapaxes(-1, -2), (np.abs(b2) + eb2).swapaxes(-1, -2),
                    eb2.swapaxes(-1, -2) if eb2.any() else None)

        bt, magnitude, ebt = _memo(p, transposed)
        spread = np.matmul(r2, magnitude)
        carried = spread if ebt is None else np.matmul(np.abs(c2), ebt) + spread
        grad = (alpha * np.matmul(c2, bt), abs(alpha) * carried)
        grad = (grad[0].T, grad[1].T) if attrs.get("transA", 0) else grad
        grads[0] = (_unbroadcast(grad[0], args[0].shape), _unbroadcast(grad[1], args[0].shape))
    if errs[1] is not None:
        a2 = a if a.ndim > 1 else a[None, :]
        c2, r2 = (centre, radius) if a.ndim > 1 else (centre[..., None, :], radius[..., None, :])
        grad = (alpha * np.matmul(a2.swapaxes(-1, -2), c2), abs(alpha) * np.matmul(np.abs(a2).swapaxes(-1, -2), r2))
        grad = (grad[0].T, grad[1].T) if attrs.get("transB", 0) else grad
        grads[1] = (_unbroadcast(grad[0], args[1].shape), _unbroadcast(grad[1], args[1].shape))
    if len(args) > 2 and args[2] is not None:
        beta = attrs.get("beta", 1.0)
        grads.append((_unbroadcast(beta * centre, np.shape(args[2])),
                      _unbroadcast(abs(beta) * radius, np.shape(args[2]))))
    return grads


def _bilinear(op: str, p, args, errs, attrs) -> tuple[np.ndarray, np.ndarray]:
    """For an op linear in its input x and its weights w (Conv, ConvTranspose), computed by the op itself on
    magnitudes: the error carried from x's and w's errors, |e_x| |w| + |x| |e_w| + |e_x| |e_w|, and the magnitude
    (|x| + e_x)(|w| + e_w) that the op's own rounding scales."""
    x, w = args[0], args[1]
    ex, ew = _zero(errs[0], x), _zero(errs[1], w)
    apply = float64._OPS[op]
    carried = apply(p.evaluator, [ex, np.abs(w)], attrs) + apply(p.evaluator, [np.abs(x), ew], attrs) \
        + apply(p.evaluator, [ex, ew], attrs)
    return carried, apply(p.evaluator, [np.abs(x) + ex, np.abs(w) + ew], attrs)


@_forward("Conv")
def _conv(p, args, errs, attrs, y):
    x, w = args[0], args[1]
    carried, magnitude = _bilinear("Conv", p, args, errs, attrs)
    ex = _zero(errs[0], x)  # the input's error, for the running-sum rule of a declared order
    n = int(np.prod(w.shape[1:])) + _folded(p)  # input channels per group x kernel taps
    shape = (1, -1) + (1,) * (x.ndim - 2)
    bias = args[2].reshape(shape) if len(args) > 2 and args[2] is not None else None
    eb = None if bias is None else _zero(errs[2], args[2]).reshape(shape)
    own = gamma(n) * magnitude if bias is None else gamma(n + 1) * (magnitude + np.abs(bias) + eb)
    if p.order is not None and p.order.conv_taps and x.ndim == 4 and errs[1] is None:
        declared = functools.reduce(np.maximum, (  # the largest over the declared orders holds for each
            _finish(_conv_running(p, x, ex, w, attrs, taps), 1.0, 0 if bias is None else 1, 1.0, bias, eb)
            for taps in p.order.conv_taps))
        own = np.minimum(own, declared)
    return (carried, own) if bias is None else (carried + eb, own)


def _conv_running(p, x: np.ndarray, ex: np.ndarray, w: np.ndarray, attrs: dict, taps: str) -> tuple:
    """``_running_bound`` of a 2-D convolution whose taps are summed in the nest order ``taps`` (``I``, ``H``,
    ``W``), per group; (E, S, P) each (N, M, H_out, W_out). Padded taps read 0.0: they add nothing to a
    partial sum, and counting their step only loosens the bound."""
    kernel, strides, dilations, pads = float64._window_attrs(x, attrs, attrs.get("kernel_shape", w.shape[2:]))
    windows = float64._windows(x, kernel, strides, dilations, pads)  # (N, C, Ho, Wo, kh, kw)
    errors = float64._windows(ex, kernel, strides, dilations, pads)
    n, c, ho, wo = windows.shape[:4]
    group, m = attrs.get("group", 1), w.shape[0]
    per_in, per_out = c // group, m // group
    axes = {"I": 1, "H": 4, "W": 5}  # of a window tensor; the kernel's are I 1, H 2, W 3
    window_order = (0, 2, 3) + tuple(axes[letter] for letter in taps)
    kernel_order = tuple(axes[letter] - (2 if letter != "I" else 0) for letter in taps) + (0,)
    parts = []
    for g in range(group):
        a = windows[:, g * per_in:(g + 1) * per_in].transpose(window_order).reshape(n, ho * wo, -1)
        ea = errors[:, g * per_in:(g + 1) * per_in].transpose(window_order).reshape(n, ho * wo, -1)
        b = w[g * per_out:(g + 1) * per_out].transpose(kernel_order).reshape(-1, per_out)
        parts.append(_running_bound(a, ea, b, p))
    return tuple(np.concatenate([part[i] for part in parts], axis=2).transpose(0, 2, 1).reshape(n, m, ho, wo)
                 for i in range(3))


def _conv_transpose(g: np.ndarray, w: np.ndarray, x_shape: tuple, attrs: dict) -> np.ndarray:
    """The adjoint of Conv (no bias) with weights ``w``, applied to ``g`` (N, M, *out): (N, C, *spatial)."""
    kernel, strides, dilations, pads = float64._window_attrs(np.zeros((1, 1, *x_shape[2:])), attrs,
                                                             attrs.get("kernel_shape", w.shape[2:]))
    group = attrs.get("group", 1)
    n, m = g.shape[:2]
    c = x_shape[1]
    gg = g.reshape(n, group, m // group, *g.shape[2:])
    ww = w.reshape(group, m // group, c // group, *w.shape[2:])
    letters = "hwdtuv"[: len(kernel)]
    taps = "ijklmo"[: len(kernel)]
    per_tap = np.einsum(f"ngm{letters},gmc{taps}->ngc{letters}{taps}", gg, ww, optimize=True)
    per_tap = per_tap.reshape(n, c, *per_tap.shape[3:])
    return _scatter(per_tap, x_shape, kernel, strides, dilations, pads)


@_reverse("Conv")
def _conv_back(p, args, errs, attrs, y, centre, radius):
    x, w = args[0], args[1]
    ew = _zero(errs[1], w)
    grad_x = (_conv_transpose(centre, w, x.shape, attrs),
              _conv_transpose(np.abs(centre), ew, x.shape, attrs) + _conv_transpose(radius, np.abs(w) + ew, x.shape,
                                                                                    attrs))
    grads = [grad_x, None]  # weights are constants (a computed weight tensor has an a-priori bound only)
    if len(args) > 2 and args[2] is not None:
        grads.append((centre.sum(axis=tuple(i for i in range(centre.ndim) if i != 1)),
                      radius.sum(axis=tuple(i for i in range(radius.ndim) if i != 1))))
    return grads


@_forward("Add", "Sub")
def _add(p, args, errs, attrs, y):
    carried = _zero(errs[0], args[0]) + _zero(errs[1], args[1])
    return carried, U * (np.abs(y) + carried)


@_reverse("Add", "Sub")
def _add_back(p, args, errs, attrs, y, centre, radius):
    sign = -1.0 if p.current == "Sub" else 1.0
    return [(_unbroadcast(centre, np.shape(args[0])), _unbroadcast(radius, np.shape(args[0]))),
            (_unbroadcast(sign * centre, np.shape(args[1])), _unbroadcast(radius, np.shape(args[1])))]


@_forward("Sum")
def _sum(p, args, errs, attrs, y):
    carried = sum(_zero(e, a) for a, e in zip(args, errs))
    magnitude = sum(np.abs(a) for a in args) + carried
    return carried, (gamma(len(args) - 1) if len(args) > 1 else 0.0) * magnitude


@_reverse("Sum")
def _sum_back(p, args, errs, attrs, y, centre, radius):
    return [(_unbroadcast(centre, np.shape(a)), _unbroadcast(radius, np.shape(a))) for a in args]


@_forward("Mul")
def _mul(p, args, errs, attrs, y):
    (a, b), (ea, eb) = args, (_zero(errs[0], args[0]), _zero(errs[1], args[1]))
    carried = np.abs(a) * eb + np.abs(b) * ea + ea * eb
    return carried, U * (np.abs(y) + carried)


@_reverse("Mul")
def _mul_back(p, args, errs, attrs, y, centre, radius):
    """a^ b^ - a b = (a^ - a) b^ + a (b^ - b): the slope for a is b^, within [b - e_b, b + e_b]."""
    (a, b), eb = args, _zero(errs[1], args[1])
    return [(_unbroadcast(centre * b, np.shape(a)), _unbroadcast(np.abs(centre) * eb + radius * (np.abs(b) + eb),
                                                                 np.shape(a))),
            (_unbroadcast(centre * a, np.shape(b)), _unbroadcast(radius * np.abs(a), np.shape(b)))]


def _divisor(args, errs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(|b|, e_b, the lowest |b^| over the box, floored at TINY where the box reaches 0) of a quotient's divisor."""
    b, eb = np.abs(args[1]), _zero(errs[1], args[1])
    return b, eb, np.maximum(b - eb, TINY)


@_forward("Div")
def _div(p, args, errs, attrs, y):
    """a^/b^ - a/b = ((a^ - a) b - a (b^ - b)) / (b b^): at most (e_a |b| + |a| e_b) / (|b| (|b| - e_b)), no finite
    bound where the divisor's box reaches 0; one rounding."""
    a, ea = args[0], _zero(errs[0], args[0])
    b, eb, low = _divisor(args, errs)
    carried = np.where(b - eb > 0, (ea * b + np.abs(a) * eb) / (np.maximum(b, TINY) * low), np.inf)
    carried = np.where((ea == 0) & (eb == 0) & (b > 0), 0.0, carried)
    return carried, U * (np.abs(y) + carried)


@_reverse("Div")
def _div_back(p, args, errs, attrs, y, centre, radius):
    """For a the slope 1/b^, within e_b / (|b| (|b| - e_b)) of 1/b; for b the slope -a^/b^^2, within
    e_a / (|b| - e_b)^2 + |a| (1 / (|b| - e_b)^2 - 1 / b^2) of -a/b^2."""
    a, ea = args[0], _zero(errs[0], args[0])
    b, eb, low = _divisor(args, errs)
    reach = np.where(b - eb > 0, 1.0, np.inf)  # a divisor's box through 0: any slope
    sign = np.where(args[1] < 0, -1.0, 1.0)
    grads = [(_unbroadcast(centre * sign / np.maximum(b, TINY), np.shape(a)),
              _unbroadcast((np.abs(centre) * eb / (np.maximum(b, TINY) * low) + radius / low) * reach, np.shape(a)))]
    if errs[1] is None:
        return grads + [None]
    near, exact = 1.0 / low ** 2, 1.0 / np.maximum(b, TINY) ** 2
    move = ea * near + np.abs(a) * (near - exact)
    grads.append((_unbroadcast(-centre * a * exact, np.shape(args[1])),
                  _unbroadcast((np.abs(centre) * move + radius * (np.abs(a) + ea) * near) * reach,
                               np.shape(args[1]))))
    return grads


@_forward("Resize", "Upsample")
def _resize(p, args, errs, attrs, y):
    """y = W x + c per resized axis (``float64.resize_operators``): |W| e carried; locally the C's K-term sum
    of products of its weights (each a float32 rounding of its float64 value) and x, or a separable
    evaluation rounding after each axis: gamma_(K + 2 axes) |W| (|x| + e), plus the weights' move when an
    implementation computes the source coordinates in float32 (each axis's ``slack``). Nearest copies: exact
    (ties fall the same way in float32 and float64 for the spec's coordinates)."""
    operators = float64.resize_operators(args[0].shape, args, attrs)
    ex = _zero(errs[0], args[0])
    carried = float64.apply_resize(ex, operators, absolute=True, constant=False)
    if float64._text(attrs.get("mode"), "nearest") == "nearest":
        return carried, 0.0
    taps = int(np.prod([operator[3] for operator in operators])) if operators else 1
    size = np.abs(args[0]) + ex
    magnitude = float64.apply_resize(size, operators, absolute=True, constant=False)
    # weights from float32 coordinates (ONNX Runtime): one axis's weights moved by its slack, the others' kept
    moved = sum(float64.apply_resize(size, [(axis, slack if k == j else weights, c, n, slack)
                                            for j, (axis, weights, c, n, slack) in enumerate(operators)],
                                     absolute=True, constant=False) for k in range(len(operators)))
    return carried, gamma(taps + 2 * len(operators)) * magnitude + moved


@_reverse("Resize", "Upsample")
def _resize_back(p, args, errs, attrs, y, centre, radius):
    """The transpose of each W in reverse order (the weights are exact: |W|^T carries the radius)."""
    operators = _memo(p, lambda: float64.resize_operators(args[0].shape, args, attrs))
    for axis, weights, *_ in reversed(operators):
        centre = np.moveaxis(np.tensordot(centre, weights, axes=([axis], [0])), -1, axis)
        radius = np.moveaxis(np.tensordot(radius, np.abs(weights), axes=([axis], [0])), -1, axis)
    return [(centre, radius)] + [None] * (len(args) - 1)


# --- smooth activations -----------------------------------------------------------------------------------


def _tanh_slopes(x, e):
    near, far = np.maximum(np.abs(x) - e, 0.0), np.abs(x) + e
    return 1.0 - np.tanh(far) ** 2, 1.0 - np.tanh(near) ** 2


@_forward("Tanh")
def _tanh(p, args, errs, attrs, y):
    """1 - tanh^2 on [x - e, x + e] is the Lipschitz constant; tanhf is within its ulp of a result below 1."""
    e = _zero(errs[0], args[0])
    return _tanh_slopes(args[0], e)[1] * e, libm_ulp()["tanh"] * ULP_BELOW_ONE + U * np.abs(y)


@_reverse("Tanh")
def _tanh_back(p, args, errs, attrs, y, centre, radius):
    return _elementwise(*_memo(p, lambda: _tanh_slopes(args[0], _zero(errs[0], args[0]))), centre, radius)


def _sigmoid_slopes(x, e):
    near, far = np.maximum(np.abs(x) - e, 0.0), np.abs(x) + e
    s_near, s_far = 1.0 / (1.0 + np.exp(-near)), 1.0 / (1.0 + np.exp(-far))
    return s_far * (1 - s_far), s_near * (1 - s_near)


@_forward("Sigmoid")
def _sigmoid(p, args, errs, attrs, y):
    """s (1 - s) on the box is the Lipschitz constant. 1 / (1 + expf(-x)) is within expf's relative error and two
    roundings of s (no cancellation: 1 + t > t), which is 2 k + 2 ulp for expf's k; a runtime's own sigmoid
    (ONNX Runtime's rational approximation) is held to the same ulp of a result below 1, absolutely."""
    e = _zero(errs[0], args[0])
    lipschitz = _sigmoid_slopes(args[0], e)[1]
    return lipschitz * e, (2 * libm_ulp()["exp"] + 2) * ULP_BELOW_ONE + U * (np.abs(y) + lipschitz * e)


@_reverse("Sigmoid")
def _sigmoid_back(p, args, errs, attrs, y, centre, radius):
    return _elementwise(*_memo(p, lambda: _sigmoid_slopes(args[0], _zero(errs[0], args[0]))), centre, radius)


@_forward("Exp")
def _exp(p, args, errs, attrs, y):
    e = _zero(errs[0], args[0])
    grown = np.abs(y) * np.exp(e)
    return grown - np.abs(y), exp_relative() * grown + TINY


@_reverse("Exp")
def _exp_back(p, args, errs, attrs, y, centre, radius):
    e = _zero(errs[0], args[0])
    return _elementwise(y * np.exp(-e), y * np.exp(e), centre, radius)


GELU_TANH = (math.sqrt(2 / math.pi), 0.044715)  # ONNX Gelu approximate="tanh": tanh(c1 (x + c2 x^3))


def _gelu_slopes(x, e, approximate: str):
    """gelu' over [x - e, x + e] within [low, high], by interval arithmetic on gelu' = F(x) + h(x) s(x): erf form
    F = Phi (the normal CDF, increasing), h = x, s = phi (the normal density, largest nearest 0); tanh form
    F = (1 + tanh(A)) / 2, h = x c1 (1 + 3 c2 x^2) / 2, s = 1 - tanh(A)^2, A = c1 (x + c2 x^3) (odd, increasing).
    F and h rise with x, s >= 0 falls with |x|: each is bounded by its values at the box's ends."""
    a, b = x - e, x + e
    near = np.where((a <= 0) & (b >= 0), 0.0, np.minimum(np.abs(a), np.abs(b)))
    far = np.maximum(np.abs(a), np.abs(b))
    if approximate == "tanh":
        c1, c2 = GELU_TANH

        def argument(t):
            return c1 * (t + c2 * t ** 3)

        rising = [0.5 * (1 + np.tanh(argument(t))) for t in (a, b)]
        h = [0.5 * c1 * t * (1 + 3 * c2 * t * t) for t in (a, b)]
        s = [1 - np.tanh(argument(t)) ** 2 for t in (far, near)]
    else:
        rising = [0.5 * (1 + float64.erf(t / math.sqrt(2))) for t in (a, b)]
        h = [a, b]
        s = [np.exp(-t * t / 2) / math.sqrt(2 * math.pi) for t in (far, near)]
    products = [hi * si for hi in h for si in s]
    return rising[0] + np.minimum.reduce(products), rising[1] + np.maximum.reduce(products)


@_forward("Gelu")
def _gelu(p, args, errs, attrs, y):
    """Lipschitz: the largest |gelu'| on the box. Rounding of ``0.5f * x * (1.0f + f(arg))`` at a float32 input
    of magnitude at most m = |x| + e, f = erff(x * c) or tanhf(c1 * (x + c2 * x * x * x)) (codegen/activations.py):
    the argument is within gamma_2 (erf: the constant and the product) or gamma_7 (tanh: two constants, five
    operations) of the exact one, so f is off by its ulp plus f's slope over that gap times the gap (erf's
    2/sqrt(pi) exp(-z^2) at the smallest |z|, tanh's 1 - tanh^2); then 1 + f and the product round (gamma_2 of
    0.5 m |1 + f|), 0.5 x is exact but for underflow (TINY, twice)."""
    x, e = args[0], _zero(errs[0], args[0])
    approximate = float64.gelu_mode(attrs)
    low, high = _gelu_slopes(x, e, approximate)
    magnitude, near = np.abs(x) + e, np.maximum(np.abs(x) - e, 0.0)
    if approximate == "tanh":
        c1, c2 = GELU_TANH
        gap = gamma(7) * c1 * (magnitude + c2 * magnitude ** 3)
        slope = 1 - np.tanh(c1 * (near + c2 * near ** 3) * (1 - gamma(7))) ** 2
        own = libm_ulp()["tanh"] * ULP_BELOW_ONE + gap * slope
    else:
        z_near = near / math.sqrt(2) * (1 - gamma(2))
        own = libm_ulp()["erf"] * ULP_BELOW_ONE \
            + 2 / math.sqrt(math.pi) * np.exp(-z_near * z_near) * gamma(2) * magnitude / math.sqrt(2)
    local = 0.5 * magnitude * (own + (2 + own) * gamma(2)) + 2 * TINY + U * np.abs(y)
    return np.maximum(np.abs(low), np.abs(high)) * e, local


@_reverse("Gelu")
def _gelu_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    return _elementwise(*_memo(p, lambda: _gelu_slopes(x, e, float64.gelu_mode(attrs))), centre, radius)


def _softmax_axis(p, x, attrs) -> int:
    if p.opset < 13 and x.ndim != 2:
        raise ModelError("Softmax before opset 13 on a tensor of rank other than 2 has no derived bound")
    return attrs.get("axis", -1 if p.opset >= 13 else 1) % x.ndim



def _exp_row(p, x, e, attrs) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """What Softmax and LogSoftmax share: the axis, its length, the row's largest input error (D), |x_j - max| and
    the relative error a of each row's exp(x_j - max) terms, the argument's rounding and D's effect included."""
    axis = _softmax_axis(p, x, attrs)
    drift = np.max(e, axis=axis, keepdims=True)
    spread = np.abs(x - np.max(x, axis=axis, keepdims=True))
    a = np.max((1 + exp_relative()) * np.exp(spread * U + 2 * drift * U) - 1, axis=axis, keepdims=True)
    return axis, x.shape[axis], drift, spread, a

@_forward("Softmax")
def _softmax(p, args, errs, attrs, y):
    """Perturbing the inputs by at most D moves y_i by at most y_i (e^{2D} - 1). Rounding: expf of x_j - max
    (itself rounded: relative u |x_j - m| in the argument), a sum of n positive terms, a division."""
    x, e = args[0], _zero(errs[0], args[0])
    axis, n, drift, spread, a = _exp_row(p, x, e, attrs)
    if np.any(a >= 1):
        return np.full(y.shape, np.inf), 0.0
    relative = (1 + a) * (1 + U) / ((1 - a) * (1 - gamma(max(n - 1, 1)))) - 1
    perturbed = np.abs(y) * np.exp(2 * drift)
    return perturbed - np.abs(y), relative * np.minimum(perturbed, 1.0) + TINY


@_reverse("Softmax")
def _softmax_back(p, args, errs, attrs, y, centre, radius):
    """J = diag(y) - y y^T along the axis; over the box every y moves by a factor within e^{+-2D}, so every
    |J_ij| by e^{4D} (and 1 - y_i by y_i (e^{2D} - 1)): the radius."""
    x, e = args[0], _zero(errs[0], args[0])
    axis = _softmax_axis(p, x, attrs)
    drift = np.max(e, axis=axis, keepdims=True)
    inner = np.sum(centre * y, axis=axis, keepdims=True)
    c = y * (centre - inner)

    def abs_jacobian_t(v):  # |J|^T v, v >= 0
        return y * (v * (1 - 2 * y) + np.sum(y * v, axis=axis, keepdims=True))

    growth = np.exp(4 * drift)
    r = abs_jacobian_t(np.abs(centre)) * (growth - 1) + 2 * y * (np.exp(2 * drift) - 1) * np.abs(centre) \
        + abs_jacobian_t(radius) * growth + 2 * y * (np.exp(2 * drift) - 1) * radius
    return [(c, r)]


# --- normalisation and pooling ------------------------------------------------------------------------------


def _batch_norm_factor(args, attrs, ndim):
    scale, bias, mean, var = args[1:5]
    shape = (1, -1) + (1,) * (ndim - 2)
    return (scale / np.sqrt(var + attrs.get("epsilon", 1e-5))).reshape(shape), shape


@_forward("BatchNormalization")
def _batch_norm(p, args, errs, attrs, y):
    """y = a x + c with a = scale / sqrt(var + eps), c = bias - mean a, however the code folds them: at most
    eight roundings (eps, sqrt, divide, the fold, the product, the sum) on each term."""
    x, bias, mean = args[0], args[2], args[3]
    a, shape = _batch_norm_factor(args, attrs, x.ndim)
    e = _zero(errs[0], x)
    terms = np.abs(a) * (np.abs(x) + e) + np.abs(a * mean.reshape(shape)) + np.abs(bias).reshape(shape)
    return np.abs(a) * e, gamma(8) * terms


@_reverse("BatchNormalization")
def _batch_norm_back(p, args, errs, attrs, y, centre, radius):
    a, _ = _batch_norm_factor(args, attrs, args[0].ndim)
    return [(centre * a, radius * np.abs(a)), None, None, None, None]


@_forward("AveragePool", "GlobalAveragePool")
def _average_pool(p, args, errs, attrs, y):
    """A window sum of k terms (k - 1 roundings) and a division by k (or a product by a rounded 1/k)."""
    x, e = args[0], _zero(errs[0], args[0])
    op = float64._OPS[p.current]
    k = int(np.prod(x.shape[2:])) if p.current == "GlobalAveragePool" else int(np.prod(attrs["kernel_shape"]))
    return op(p.evaluator, [e], attrs), gamma(k + 1) * op(p.evaluator, [np.abs(x) + e], attrs)


@_reverse("AveragePool", "GlobalAveragePool")
def _average_pool_back(p, args, errs, attrs, y, centre, radius):
    x = args[0]
    if p.current == "GlobalAveragePool":
        k = int(np.prod(x.shape[2:]))
        return [(np.broadcast_to(centre / k, x.shape), np.broadcast_to(radius / k, x.shape))]
    # the pool is linear: its adjoint spreads each output's gradient over its window, divided by the count
    kernel, strides, dilations, pads = float64._window_attrs(x, attrs, attrs["kernel_shape"])
    ones = float64._OPS["AveragePool"](p.evaluator, [np.ones((1, 1, *x.shape[2:]))], attrs)
    total = float64._windows(np.ones((1, 1, *x.shape[2:])), kernel, strides, dilations, pads).sum(
        axis=tuple(range(-len(kernel), 0)))
    count = total / ones  # the divisor of each output position
    spread = (...,) + (None,) * len(kernel)
    taps = np.ones(tuple(kernel))
    return [(_scatter((centre / count)[spread] * taps, x.shape, kernel, strides, dilations, pads),
             _scatter((radius / count)[spread] * taps, x.shape, kernel, strides, dilations, pads))]


# --- the other ops the generators accept ----------------------------------------------------------------------------
# Each as its float32 implementations compute it: the libm functions of ``libm_ulp`` within their ulp, every other
# operation one rounding (u of its result's magnitude, the float64 yardstick's own included: ``U``).


def _relative(name: str) -> float:
    """The relative error of a libm function within ``libm_ulp``'s ulp of its result (k ulp <= k 2^-23 |y|)."""
    return libm_ulp()[name] * 2 * U32


def _hull(*pieces: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and highest slope over (present, low, high) pieces of a box: ``present`` where the piece meets it."""
    low = functools.reduce(np.minimum, (np.where(on, lo, np.inf) for on, lo, _ in pieces))
    high = functools.reduce(np.maximum, (np.where(on, hi, -np.inf) for on, _, hi in pieces))
    return low, high


def _lipschitz(slopes: tuple) -> np.ndarray:
    return np.maximum(np.abs(slopes[0]), np.abs(slopes[1]))


@_forward("Neg")
def _neg(p, args, errs, attrs, y):
    return _zero(errs[0], args[0]), 0.0


@_reverse("Neg")
def _neg_back(p, args, errs, attrs, y, centre, radius):
    return [(-centre, radius)]


@_forward("Abs")
def _abs(p, args, errs, attrs, y):
    return _zero(errs[0], args[0]), 0.0  # exact, 1-Lipschitz


@_reverse("Abs")
def _abs_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    return _elementwise(np.where(x > e, 1.0, -1.0), np.where(x < -e, -1.0, 1.0), centre, radius)


def _sqrt_slopes(x, e):
    return 0.5 / np.sqrt(x + e), 0.5 / np.sqrt(np.maximum(x - e, 0.0))


@_forward("Sqrt")
def _sqrt(p, args, errs, attrs, y):
    """|sqrt(x^) - sqrt(x)| = |x^ - x| / (sqrt(x^) + sqrt(x)), and at most sqrt|x^ - x| (a box that reaches 0);
    sqrtf is correctly rounded."""
    x, e = args[0], _zero(errs[0], args[0])
    carried = np.minimum(np.sqrt(e), e / (np.sqrt(np.maximum(x - e, 0.0)) + np.sqrt(np.maximum(x, 0.0))))
    carried = np.where(e == 0, 0.0, carried)
    return carried, _relative("sqrt") * (np.abs(y) + carried) + U * np.abs(y) + TINY


@_reverse("Sqrt")
def _sqrt_back(p, args, errs, attrs, y, centre, radius):
    return _elementwise(*_memo(p, lambda: _sqrt_slopes(args[0], _zero(errs[0], args[0]))), centre, radius)


def _inverse_slopes(x, e):
    """1 / x's slope -1 / t^2 over [x - e, x + e], unbounded where the box reaches 0."""
    near, far = np.abs(x) - e, np.abs(x) + e
    return np.where(near > 0, -1.0 / np.maximum(near, TINY) ** 2, -np.inf), -1.0 / far ** 2


@_forward("Reciprocal")
def _reciprocal(p, args, errs, attrs, y):
    """|1/x^ - 1/x| = |x^ - x| / (|x^| |x|); a box that reaches 0 has no finite bound. Correctly rounded."""
    x, e = args[0], _zero(errs[0], args[0])
    near = np.abs(x) - e
    carried = np.where(e == 0, 0.0, np.where(near > 0, e / (np.abs(x) * np.maximum(near, TINY)), np.inf))
    return carried, U * (np.abs(y) + carried) + TINY


@_reverse("Reciprocal")
def _reciprocal_back(p, args, errs, attrs, y, centre, radius):
    return _elementwise(*_memo(p, lambda: _inverse_slopes(args[0], _zero(errs[0], args[0]))), centre, radius)


@_forward("Log")
def _log(p, args, errs, attrs, y):
    """|ln x^ - ln x| <= |x^ - x| / (x - e) for a box above 0 (none reaching it); logf within its ulp."""
    x, e = args[0], _zero(errs[0], args[0])
    carried = np.where(e == 0, 0.0, np.where(x - e > 0, e / np.maximum(x - e, TINY), np.inf))
    return carried, _relative("log") * (np.abs(y) + carried) + U * np.abs(y) + TINY


@_reverse("Log")
def _log_back(p, args, errs, attrs, y, centre, radius):
    def slopes():
        x, e = args[0], _zero(errs[0], args[0])
        return 1.0 / (x + e), np.where(x - e > 0, 1.0 / np.maximum(x - e, TINY), np.inf)

    return _elementwise(*_memo(p, slopes), centre, radius)


@_forward("Softsign")
def _softsign(p, args, errs, attrs, y):
    """x / (1 + |x|): slope 1 / (1 + |t|)^2 on the box; two roundings (the sum, the quotient)."""
    x, e = args[0], _zero(errs[0], args[0])
    carried = e / (1 + np.maximum(np.abs(x) - e, 0.0)) ** 2
    return carried, gamma(2) * (np.abs(y) + carried)


@_reverse("Softsign")
def _softsign_back(p, args, errs, attrs, y, centre, radius):
    def slopes():
        x, e = np.abs(args[0]), _zero(errs[0], args[0])
        return 1 / (1 + x + e) ** 2, 1 / (1 + np.maximum(x - e, 0.0)) ** 2

    return _elementwise(*_memo(p, slopes), centre, radius)


def _hard_swish_slopes(x, e):
    """x hardsigmoid(x) = x clip(x / 6 + 1/2, 0, 1): slope 0 below -3, x / 3 + 1/2 between, 1 above 3."""
    a, b = x - e, x + e
    middle = (np.maximum(a, -3.0) / 3 + 0.5, np.minimum(b, 3.0) / 3 + 0.5)
    return _hull((a < -3, 0.0, 0.0), ((a <= 3) & (b >= -3), *middle), (b > 3, 1.0, 1.0))


@_forward("HardSwish")
def _hard_swish(p, args, errs, attrs, y):
    """The hard sigmoid's argument and clip within gamma_4 (m / 6 + 3/2) (``x * (1/6) + 0.5`` with 1/6 rounded, or
    ``(x + 3) / 6``), times x and one more rounding: gamma_6 m (m / 6 + 5/2) for |x^| <= m."""
    x, e = args[0], _zero(errs[0], args[0])
    m = np.abs(x) + e
    return _lipschitz(_hard_swish_slopes(x, e)) * e, gamma(6) * m * (m / 6 + 2.5)


@_reverse("HardSwish")
def _hard_swish_back(p, args, errs, attrs, y, centre, radius):
    return _elementwise(*_memo(p, lambda: _hard_swish_slopes(args[0], _zero(errs[0], args[0]))), centre, radius)


def _elu_slopes(x, e, alpha):
    """x above 0, alpha (e^t - 1) below: slope 1, or alpha e^t on the box's part below 0."""
    a, b = x - e, x + e
    ends = alpha * np.exp(a), alpha * np.exp(np.minimum(b, 0.0))
    return _hull((b > 0, 1.0, 1.0), (a <= 0, np.minimum(*ends), np.maximum(*ends)))


def _elu_parts(p, args, errs, attrs):
    """(alpha, scale) of Elu (scale 1) or Selu (the spec's float32 defaults, as ``float64`` evaluates it)."""
    if p.current == "Selu":
        return attrs.get("alpha", 1.67326319217681884765625), attrs.get("gamma", 1.05070102214813232421875)
    return attrs.get("alpha", 1.0), 1.0


@_forward("Elu", "Selu")
def _elu(p, args, errs, attrs, y):
    """Below 0, alpha (expm1f(x) or expf(x) - 1): expf within its relative error of e^x <= 1, the subtraction one
    rounding of |e^x - 1| <= 1 (expm1f's ulp is smaller), the product one more; Selu's scale one more."""
    x, e = args[0], _zero(errs[0], args[0])
    alpha, scale = _elu_parts(p, args, errs, attrs)
    carried = abs(scale) * _lipschitz(_elu_slopes(x, e, alpha)) * e
    grown = np.exp(np.minimum(x + e, 0.0))
    below = abs(alpha) * (exp_relative() * grown + 2 * U * np.minimum(1.0, np.abs(np.expm1(np.minimum(x, 0.0)))
                                                                      + e * grown)) * (1 + U)
    own = abs(scale) * np.where(x - e <= 0, below, 0.0) * (1 + U) + U * (np.abs(y) + carried)
    return carried, own


@_reverse("Elu", "Selu")
def _elu_back(p, args, errs, attrs, y, centre, radius):
    alpha, scale = _elu_parts(p, args, errs, attrs)
    low, high = _memo(p, lambda: _elu_slopes(args[0], _zero(errs[0], args[0]), alpha))
    ends = scale * low, scale * high
    return _elementwise(np.minimum(*ends), np.maximum(*ends), centre, radius)


SOFTPLUS_SWITCH = 13.0  # beyond it TensorFlow returns exp(x) (below -13.9) or x (above 13.9): allowed for


def _logistic(t):
    return 0.5 * (1 + np.tanh(t / 2))


@_forward("Softplus")
def _softplus(p, args, errs, attrs, y):
    """ln(1 + e^x), slope sigmoid(x) on the box. Computed stably (``max(x, 0) + log1pf(expf(-|x|))``, or
    ``log1pf(expf(x))``): expf's relative error of t = e^-|x| <= 1 moves log1p by at most that times t, and
    t <= y / ln 2 (y >= ln(1 + t) >= t ln 2); log1pf within its ulp of y, the sum one rounding. Or by the textbook
    ``logf(1 + expf(x))`` (ONNX Runtime): the sum 1 + t rounds by u (1 + t), which moves the logarithm by u
    absolutely, all of a tiny y: 2 u more, absolute. TensorFlow returns exp(x) below -13.9 (relative error e^x / 2)
    and x above 13.9 (absolute e^-x): both counted where the box reaches beyond 13."""
    x, e = args[0], _zero(errs[0], args[0])
    carried = _logistic(x + e) * e
    magnitude = np.abs(y) + carried
    own = (_relative("log1p") + (exp_relative() - U) / math.log(2) + 2 * U) * magnitude * (1 + U) + 2 * U
    switched = np.where(x - e < -SOFTPLUS_SWITCH, 0.5 * np.exp(np.minimum(x + e, 0.0)) * magnitude, 0.0) \
        + np.where(x + e > SOFTPLUS_SWITCH, np.exp(-np.maximum(x - e, 0.0)), 0.0)
    return carried, own + switched


@_reverse("Softplus")
def _softplus_back(p, args, errs, attrs, y, centre, radius):
    def slopes():
        x, e = args[0], _zero(errs[0], args[0])
        return _logistic(x - e), _logistic(x + e)

    return _elementwise(*_memo(p, slopes), centre, radius)


@_forward("Mean")
def _mean(p, args, errs, attrs, y):
    """The sum of n operands (n - 1 roundings) divided by n (or times a rounded 1/n): gamma_(n+1) of the mean of
    the magnitudes."""
    n = len(args)
    carried = sum(np.broadcast_to(_zero(e, a), y.shape) for a, e in zip(args, errs)) / n
    magnitude = sum(np.broadcast_to(np.abs(a) + _zero(e, a), y.shape) for a, e in zip(args, errs)) / n
    return carried, gamma(n + 1) * magnitude


@_reverse("Mean")
def _mean_back(p, args, errs, attrs, y, centre, radius):
    n = len(args)
    return [(_unbroadcast(centre / n, np.shape(a)), _unbroadcast(radius / n, np.shape(a))) for a in args]


REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceSumSquare", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceProd")


def _reduced(p, args, attrs):
    """(axes, keepdims, count) of the reduction being propagated; axes None when it reduces nothing."""
    x = args[0]
    axes = float64.reduce_axes(p.evaluator, p.current, args, attrs, x.ndim)
    count = 1 if axes is None else math.prod(x.shape[a] for a in axes)
    return axes, bool(attrs.get("keepdims", 1)), count


def _reduce(values: np.ndarray, how, axes, keep: bool) -> np.ndarray:
    """``how`` (np.sum, np.max, ...) of ``values`` over ``axes`` as the reduction shapes its output."""
    if axes is None:
        return values
    return how(values, axis=axes, keepdims=keep)


def _spread(value: np.ndarray, x_shape: tuple, axes, keep: bool) -> np.ndarray:
    """A reduction's output-shaped ``value`` broadcast back onto its input's shape."""
    if axes is not None and not keep:
        value = np.expand_dims(value, axes)
    return np.broadcast_to(value, x_shape)


def _root_gap(s: np.ndarray, error: np.ndarray) -> np.ndarray:
    """A bound on |sqrt(s^) - sqrt(s)| for |s^ - s| <= error, s >= 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.minimum(np.sqrt(error), error / (np.sqrt(s) + np.sqrt(np.maximum(s - error, 0.0))))
    return np.where(error == 0, 0.0, gap)


@_forward(*REDUCTIONS)
def _reduction(p, args, errs, attrs, y):
    """Sums of K terms (any order: gamma_(K-1) of the sum of magnitudes), a mean's division, a square's rounding each,
    square roots and logarithms as their functions; max and min are exact; a product's K - 1 roundings (gamma_(K-1)
    of the product of magnitudes); log-sum-exp as softmax's sum (``_softmax``) and a logarithm."""
    x, e = args[0], _zero(errs[0], args[0])
    op = p.current
    axes, keep, k = _reduced(p, args, attrs)
    magnitude = np.abs(x) + e
    if op in ("ReduceMax", "ReduceMin"):
        return _reduce(e, np.max, axes, keep), 0.0
    if op in ("ReduceSum", "ReduceL1"):
        return _reduce(e, np.sum, axes, keep), gamma(max(k - 1, 1)) * _reduce(magnitude, np.sum, axes, keep)
    if op == "ReduceMean":
        return _reduce(e, np.mean, axes, keep), gamma(k + 1) * _reduce(magnitude, np.mean, axes, keep)
    if op == "ReduceProd":
        top = _reduce(magnitude, np.prod, axes, keep)
        return top - np.abs(y), gamma(max(k - 1, 1)) * top
    if op in ("ReduceSumSquare", "ReduceL2"):
        carried = _reduce(2 * np.abs(x) * e + e * e, np.sum, axes, keep)
        own = gamma(k) * _reduce(magnitude ** 2, np.sum, axes, keep)
        if op == "ReduceSumSquare":
            return carried, own
        s = y * y  # the exact sum of squares
        total = _root_gap(s, carried + own)
        root_own = _root_gap(s, own)
        return total - root_own, root_own + _relative("sqrt") * (np.abs(y) + total) + U * np.abs(y) + TINY
    if op == "ReduceLogSum":
        s = _reduce(x, np.sum, axes, keep)
        carried, own = _reduce(e, np.sum, axes, keep), gamma(max(k - 1, 1)) * _reduce(magnitude, np.sum, axes, keep)
        room = s - carried - own  # the float32 sum's lowest value: above 0, or no finite bound
        safe = np.maximum(room, TINY)
        log_carried = np.where(room > 0, carried / safe, np.inf)
        log_own = np.where(room > 0, own / safe, np.inf)
        return log_carried, log_own + _relative("log") * (np.abs(y) + log_carried + log_own) + U * np.abs(y) + TINY
    # ReduceLogSumExp: m + log(sum exp(x - m)), 1-Lipschitz in the largest input error
    drift = _reduce(e, np.max, axes, keep)
    top = _reduce(x, np.max, axes, True)
    spread = _reduce(np.abs(x - top), np.max, axes, keep)
    a = (1 + exp_relative()) * np.exp(spread * U + 2 * drift * U) - 1
    delta = (1 + a) * (1 + gamma(max(k - 1, 1))) - 1
    with np.errstate(divide="ignore"):
        log_error = np.where(delta < 1, delta / (1 - delta), np.inf)
    inner = np.abs(y - _reduce(x, np.max, axes, keep))
    return drift, log_error + _relative("log") * (inner + log_error) + U * (np.abs(y) + drift) + TINY


def _others(values: np.ndarray) -> np.ndarray:
    """For each element along the last axis, the product of the other elements (prefix and suffix products)."""
    ones = np.ones(values.shape[:-1] + (1,))
    before = np.cumprod(np.concatenate([ones, values[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(values[..., 1:], -1)], axis=-1), axis=-1), -1)
    return before * after


def _product_slopes(x: np.ndarray, e: np.ndarray, axes) -> tuple[np.ndarray, np.ndarray]:
    """A product's slope for each factor, the product of the others, as a centre and radius over the box."""
    rest = [a for a in range(x.ndim) if a not in axes]
    order = rest + list(axes)
    flat = x.transpose(order).reshape(*[x.shape[a] for a in rest], -1)
    wide = (np.abs(x) + e).transpose(order).reshape(flat.shape)
    centre, top = _others(flat), _others(wide)
    inverse = np.argsort(order)
    shape = [x.shape[a] for a in order]
    return (centre.reshape(shape).transpose(inverse),
            (top - np.abs(centre)).reshape(shape).transpose(inverse))


@_reverse(*REDUCTIONS)
def _reduction_back(p, args, errs, attrs, y, centre, radius):
    x, e = args[0], _zero(errs[0], args[0])
    op = p.current
    axes, keep, k = _reduced(p, args, attrs)
    c, r = _spread(centre, x.shape, axes, keep), _spread(radius, x.shape, axes, keep)
    if axes is None:
        slope_low = slope_high = np.ones(x.shape)
    elif op in ("ReduceSum", "ReduceMean"):
        factor = 1.0 / k if op == "ReduceMean" else 1.0
        return [(c * factor, r * factor)] + [None] * (len(args) - 1)
    elif op == "ReduceL1":
        slope_low, slope_high = np.where(x > e, 1.0, -1.0), np.where(x < -e, -1.0, 1.0)
    elif op == "ReduceSumSquare":
        slope_low, slope_high = 2 * (x - e), 2 * (x + e)
    elif op in ("ReduceMax", "ReduceMin"):
        def candidates():
            sign = 1.0 if op == "ReduceMax" else -1.0
            extreme = _spread(_reduce(x, np.max if sign > 0 else np.min, axes, keep), x.shape, axes, keep)
            drift = _spread(_reduce(e, np.max, axes, keep), x.shape, axes, keep)
            candidate = sign * (x - extreme) >= -e - drift
            count = _spread(_reduce(candidate.astype(int), np.sum, axes, keep), x.shape, axes, keep)
            return candidate & (count == 1), candidate & (count > 1)

        sole, shared = _memo(p, candidates)
        return [(np.where(sole, c, 0.0), np.where(sole, r, 0.0) + np.where(shared, np.abs(c) + r, 0.0))] \
            + [None] * (len(args) - 1)
    elif op == "ReduceProd":
        middle, half = _memo(p, lambda: _product_slopes(x, e, axes))
        return [(c * middle, np.abs(c) * half + r * (np.abs(middle) + half))] + [None] * (len(args) - 1)
    elif op == "ReduceL2":
        norm = _spread(np.abs(y), x.shape, axes, keep)
        drift = _spread(np.sqrt(_reduce(e * e, np.sum, axes, keep)), x.shape, axes, keep)
        low_norm = np.maximum(norm - drift, 0.0)  # |x^| over the box, by the triangle inequality
        with np.errstate(divide="ignore", invalid="ignore"):
            slope_low = np.where(low_norm > 0, (x - e) / np.maximum(low_norm, TINY), -1.0)
            slope_high = np.where(low_norm > 0, (x + e) / np.maximum(low_norm, TINY), 1.0)
        slope_low, slope_high = np.maximum(slope_low, -1.0), np.minimum(slope_high, 1.0)  # |x_i| / |x| <= 1
    elif op == "ReduceLogSum":
        s = _spread(_reduce(x, np.sum, axes, keep), x.shape, axes, keep)
        drift = _spread(_reduce(e, np.sum, axes, keep), x.shape, axes, keep)
        slope_low = 1.0 / (s + drift)
        slope_high = np.where(s - drift > 0, 1.0 / np.maximum(s - drift, TINY), np.inf)
    else:  # ReduceLogSumExp: the softmax weights, each within e^(+-2D) of its value
        weights = np.exp(x - _spread(y, x.shape, axes, keep))
        growth = np.exp(2 * _spread(_reduce(e, np.max, axes, keep), x.shape, axes, keep))
        return [(c * weights, np.abs(c) * weights * (growth - 1) + r * weights * growth)] + [None] * (len(args) - 1)
    return _elementwise(slope_low, slope_high, c, r) + [None] * (len(args) - 1)


@_forward("LogSoftmax")
def _log_softmax(p, args, errs, attrs, y):
    """x - log(sum exp(x - m)) - m: the input's own error plus the log-sum-exp's (at most the row's largest, D);
    the roundings of x - m, of the log-sum-exp (``_reduction``'s) and of the subtraction."""
    x, e = args[0], _zero(errs[0], args[0])
    axis, n, drift, spread, a = _exp_row(p, x, e, attrs)
    delta = (1 + a) * (1 + gamma(max(n - 1, 1))) - 1
    with np.errstate(divide="ignore"):
        log_error = np.where(delta < 1, delta / (1 - delta), np.inf)
    log_size = np.max(np.abs(y - (x - np.max(x, axis=axis, keepdims=True))), axis=axis, keepdims=True)
    carried = e + drift
    own = U * (spread + 2 * drift) + log_error + _relative("log") * (log_size + log_error) \
        + U * (np.abs(y) + carried) + TINY
    return carried, own


@_reverse("LogSoftmax")
def _log_softmax_back(p, args, errs, attrs, y, centre, radius):
    """J = I - 1 s^T along the axis (s the softmax): grad = c - s sum(c); over the box every s within e^(+-2D)."""
    x, e = args[0], _zero(errs[0], args[0])
    axis = _softmax_axis(p, x, attrs)
    s = np.exp(y)
    growth = np.exp(2 * np.max(e, axis=axis, keepdims=True))
    total = np.sum(centre, axis=axis, keepdims=True)
    r = radius + s * growth * np.sum(radius, axis=axis, keepdims=True) + np.abs(total) * s * (growth - 1)
    return [(centre - s * total, r)]


@_forward("ConvTranspose")
def _deconv(p, args, errs, attrs, y):
    """A scatter of products: each output a sum of at most (input channels per group) x (kernel taps) products and
    the bias: the rule of Conv with the op's own arithmetic on magnitudes."""
    x, w = args[0], args[1]
    carried, magnitude = _bilinear("ConvTranspose", p, args, errs, attrs)
    n = (x.shape[1] // attrs.get("group", 1)) * int(np.prod(w.shape[2:]))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if len(args) > 2 and args[2] is not None:
        eb = _zero(errs[2], args[2]).reshape(shape)
        return carried + eb, gamma(n + 1) * (magnitude + np.abs(args[2]).reshape(shape) + eb)
    return carried, gamma(n) * magnitude


def _deconv_adjoint(g: np.ndarray, w: np.ndarray, x_shape: tuple, attrs: dict) -> np.ndarray:
    """The adjoint of ConvTranspose (no bias) with weights ``w`` on ``g`` (N, M, *out): input cell i gets the sum
    over its taps k of g at canvas cell i * stride + k * dilation times the weight."""
    strides, dilations, begin, target, canvas_size = float64.deconv_geometry(x_shape, w.shape, attrs)
    spatial = len(x_shape) - 2
    canvas = np.zeros((*g.shape[:2], *canvas_size))
    canvas[(slice(None), slice(None), *(slice(b, b + t) for b, t in zip(begin, target)))] = g
    kernel = list(w.shape[2:])
    windows = float64._windows(canvas, kernel, strides, dilations, [0] * 2 * spatial)
    windows = windows[(slice(None), slice(None), *(slice(0, n) for n in x_shape[2:]))]
    group, per_out = attrs.get("group", 1), w.shape[1]
    per_in = x_shape[1] // group
    letters, taps = "hwdtuv"[:spatial], "ijklmo"[:spatial]
    parts = [np.einsum(f"no{letters}{taps},co{taps}->nc{letters}",
                       windows[:, k * per_out:(k + 1) * per_out], w[k * per_in:(k + 1) * per_in], optimize=True)
             for k in range(group)]
    return np.concatenate(parts, axis=1)


@_reverse("ConvTranspose")
def _deconv_back(p, args, errs, attrs, y, centre, radius):
    x, w = args[0], args[1]
    ew = _zero(errs[1], w)
    grad_x = (_deconv_adjoint(centre, w, x.shape, attrs),
              _deconv_adjoint(np.abs(centre), ew, x.shape, attrs)
              + _deconv_adjoint(radius, np.abs(w) + ew, x.shape, attrs))
    grads = [grad_x, None]  # weights are constants (a computed weight tensor has an a-priori bound only)
    if len(args) > 2 and args[2] is not None:
        grads.append((centre.sum(axis=tuple(i for i in range(centre.ndim) if i != 1)),
                      radius.sum(axis=tuple(i for i in range(radius.ndim) if i != 1))))
    return grads
