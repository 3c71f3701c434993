"""Which weight mutants some input of the domain can detect, decided apart from the test inputs.

A weight mutant changes one float32 constant of the generated C. Whether the test inputs kill it says how good the
inputs are only if we know, independently of them, that some input could: otherwise "every mutant above the
tolerance on the test inputs was killed" is circular (the test inputs judge themselves). Here the model itself is
evaluated in float64 (``harness.references.float64``, the numpy evaluator of its ONNX graph) once as it is, ``f``,
and once with the mutated weight, ``f_mut``, and the input domain (``model.domain_bounds``) is searched for the input
maximising the excess ``max_k |f_mut(x)_k - f(x)_k| - (atol + rtol |f(x)_k|)`` over the outputs: every corner of
the domain (or ``CORNERS`` seeded corners when there are more), the centre and ``RANDOM`` seeded uniform points,
then projected sign-gradient ascent from the ``STARTS`` best of them (central differences per input element up to
``COORDINATES`` elements, seeded random directions beyond), at most ``STEPS`` steps each and ``BUDGET`` probe
evaluations over all ascents (so a large input, 33 probes a step, gets fewer steps: the search's cost per mutant
stays a few thousand float64 evaluations of the model whatever its input size). No test input is used.

The mutant is **detectable** when, at the best input found (the witness, float32 like any input of the C), the
excess is larger than the rounding margin: twice the derived bound of the outputs at the witness
(``harness.references.bounds``: any correct float32 evaluation is within it of the exact value; the C and the
reference each round), or, for a model with ops that have no bound rule, twice the clean code's largest observed
error (said in ``margin_from``). A detectable mutant's C is then, at the witness, farther from the reference than the
tolerance whatever the rounding: an input set that misses it is inadequate. A mutant whose change exceeds the
tolerance at the witness but not by the margin is ``beyond_tolerance`` only: whether the C's rounding hides it is not
decided by the bound (which can be far looser than the C's actual error): the stage then builds that mutant's C
again and runs it, with the clean reference, on the witness alone (``run._confirm``); if the oracle fails it there,
it is detectable too (``confirmed_by``), else it stays ``beyond_tolerance`` only, a survivor listed for review, not
counted as a defect of the tests. "Not detectable" is the search's result, not a proof that no input
exists.

Which element of which initialiser a C array element is comes from the values: the C array (read from the code,
``operators.array_values``) must equal one initialiser of the graph, element for element, in its own order or in
an order of its axes (a Gemm's kernel stored transposed), or else holding the same values in another order where
the mutated element's value occurs once (a Keras Dense kernel after a channels-last Flatten, whose rows the export
reorders channels first); a mutant whose array matches no initialiser, or several, is left undecided, with the
reason.
"""

from __future__ import annotations

import copy
import hashlib
import itertools

import numpy as np

from harness.errors import ModelError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.references import bounds, float64
from harness.stages.mutate import operators

CORNERS = 256  # corners tried when the domain has more (2^d)
RANDOM = 256  # seeded uniform points of the domain
STARTS = 4  # ascents, from the best points found
STEPS = 30  # steps of each ascent at most
BUDGET = 1500  # probe evaluations of all ascents of one mutant together, at most
COORDINATES = 64  # up to this many input elements, the gradient by central differences per element
DIRECTIONS = 16  # beyond: random-direction differences per step
FIRST_STEP = 0.25  # of the domain's width per element; halved when a step does not improve


class _Suffix:
    """The nodes of a graph from the first that reads a weight on, and the graph's outputs: what ``Evaluator.run``
    reads of a graph, so that an evaluator holding it computes the outputs from the tensors ``fed`` at that cut."""

    def __init__(self, graph, start: int, fed: list[str]):
        self.node, self.output, self.fed = list(graph.node)[start:], graph.output, fed


class Search:
    """The float64 model, the domain's candidate inputs and the model's outputs on them, for one code.

    Every evaluation of a mutated model reuses the unmutated one's: the nodes before the first that reads the
    mutated weight compute the same tensors, so the mutated model runs only the nodes from there (``_Suffix``), fed
    with the tensors the unmutated run kept at that cut (once per candidate input for every mutant, once per probe
    of an ascent). A graph whose input has no batch axis is run whole."""

    def __init__(self, model: Model, atol: float, rtol: float, seed: int, clean_error: float):
        self.model, self.atol, self.rtol, self.seed, self.clean_error = model, atol, rtol, seed, clean_error
        self.evaluator = float64.numpy_evaluator(model)
        graph = self.evaluator.graph
        feed = self.evaluator.inputs[0]
        self.batched = len(feed.type.tensor_type.shape.dim) == len(model.input_shape) + 1
        self.cuts: dict[str, tuple[int, list[str]]] = {}  # constant -> (its first reader, the tensors fed there)
        for start, node in enumerate(graph.node):
            for name in node.input:
                if name in self.evaluator.constants and name not in self.cuts:
                    made_before = {feed.name} | {o for n in list(graph.node)[:start] for o in n.output}
                    read_after = {i for n in list(graph.node)[start:] for i in n.input}
                    self.cuts[name] = (start, sorted(made_before & read_after))
        self.kept = sorted({name for _, names in self.cuts.values() for name in names})
        self.low, self.high = (b.reshape(-1) for b in model.domain_bounds())
        self.width = self.high - self.low
        self.candidates = domain_points(model, np.random.default_rng(seed), RANDOM)
        self.base, self.base_kept = self._unmutated(self.candidates)
        missing = bounds.missing_rules(model)
        self.margin_rule = f"no derived bound for {', '.join(missing)}" if missing else None

    def decide(self, number: int, constant: str, element: tuple[int, ...], value: float) -> tuple[dict, np.ndarray]:
        """Search the domain for an input the mutant (``constant[element]`` set to ``value``) can be detected on:
        the figures, and the witness (1, *input_shape), float32."""
        mutated = copy.copy(self.evaluator)
        changed = self.evaluator.constants[constant].copy()
        changed[element] = value
        mutated.constants = {**self.evaluator.constants, constant: changed}
        if self.batched:
            mutated.graph = _Suffix(self.evaluator.graph, *self.cuts[constant])
        excess = self._excess(mutated, self.candidates, (self.base, self.base_kept))
        rng = np.random.default_rng([self.seed, number])
        best_x, best = self.candidates[int(np.argmax(excess))], float(excess.max())
        for start in np.argsort(-excess, kind="stable")[:STARTS]:
            x, value_x = self._ascend(mutated, self.candidates[start], float(excess[start]), rng)
            if value_x > best:
                best_x, best = x, value_x
        witness = best_x.astype(np.float32).reshape(1, *self.model.input_shape)
        f, kept = self._unmutated(witness)
        difference = np.abs(self._mutated(mutated, witness, kept) - f)
        tolerance = self.atol + self.rtol * np.abs(f)
        margin, margin_from = self._margin(witness)
        excess_at = float((difference - tolerance).max())
        return {"decided": True, "detectable": excess_at > margin, "beyond_tolerance": excess_at > 0,
                "witness_sha256": hashlib.sha256(witness.tobytes()).hexdigest(),
                "witness": [float(v) for v in witness.reshape(-1)] if witness.size <= 16 else None,
                "difference": float(difference.max()), "excess_over_tolerance": excess_at, "margin": margin,
                "margin_from": margin_from}, witness

    def _ascend(self, mutated, x: np.ndarray, value: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """Projected sign-gradient ascent of the excess from ``x``: (the best input, its excess).

        Each step's candidate is evaluated in one batch with the next step's probes around it (their directions
        drawn ahead; the generator is put back when the ascent ends without them), which serve when the candidate
        is taken: fewer evaluations of the model, the same points and figures as one step at a time."""
        step, h = FIRST_STEP, 1e-4
        probes_per_step = 2 * (x.size if x.size <= COORDINATES else DIRECTIONS)
        steps = min(STEPS, max(1, BUDGET // (STARTS * (probes_per_step + 1))))
        following = evaluated = None  # the next step's directions, drawn ahead; their probes' excess, if taken
        for done in range(steps):
            if step < 1e-4:
                break
            directions = following if following is not None else self._directions(x, rng)
            values = evaluated if evaluated is not None else self._excess(mutated, self._probes(x, directions, h))
            following = evaluated = None
            gradient = ((values[:len(directions)] - values[len(directions):])[:, None] * directions).sum(axis=0)
            if not np.any(gradient):
                break
            candidate = self._representable(x + step * self.width * np.sign(gradient))[0]
            if done + 1 < steps:  # with the next step's probes around the candidate, in one batch
                state = rng.bit_generator.state
                following = self._directions(candidate, rng)
                both = self._excess(mutated, np.vstack([candidate[None], self._probes(candidate, following, h)]))
                found = float(both[0])
            else:
                found = float(self._excess(mutated, candidate[None])[0])
            if found > value:
                x, value = candidate, found
                evaluated = both[1:] if following is not None else None
            else:
                step /= 2
                if following is not None and step < 1e-4:  # the loop ends here: the directions were never drawn
                    rng.bit_generator.state = state
        return x, value

    def _directions(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A step's directions: every input element up to ``COORDINATES``, else ``DIRECTIONS`` seeded ones."""
        return np.eye(x.size) if x.size <= COORDINATES else rng.choice((-1.0, 1.0), (DIRECTIONS, x.size))

    def _probes(self, x: np.ndarray, directions: np.ndarray, h: float) -> np.ndarray:
        return self._representable(np.vstack([x + h * self.width * directions, x - h * self.width * directions]))

    def _excess(self, mutated, x: np.ndarray, base: tuple[np.ndarray, dict] | None = None) -> np.ndarray:
        """Per input, max over the outputs of |f_mut - f| - (atol + rtol |f|)."""
        f, kept = self._unmutated(x) if base is None else base
        return (np.abs(self._mutated(mutated, x, kept) - f) - self.atol - self.rtol * np.abs(f)).max(axis=1)

    def _unmutated(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The unmutated model's outputs on ``x``, and the tensors a mutated model's run from a cut is fed."""
        inputs = np.asarray(x, np.float32).reshape(len(x), *self.model.input_shape)
        names = [self.evaluator.graph.output[0].name, *(self.kept if self.batched else [])]
        outputs, *kept = float64.evaluate(self.evaluator, self.model, inputs, names)
        return outputs.reshape(len(x), -1), dict(zip(names[1:], kept))

    def _mutated(self, mutated, x: np.ndarray, kept: dict[str, np.ndarray]) -> np.ndarray:
        """The mutated model's outputs on ``x``: from its cut, fed the unmutated run's tensors ``kept`` there."""
        if not self.batched:
            inputs = np.asarray(x, np.float32).reshape(len(x), *self.model.input_shape)
            return float64.evaluate(mutated, self.model, inputs)[0].reshape(len(x), -1)
        runs = [mutated.run({name: kept[name][start:start + float64.BATCH] for name in mutated.graph.fed})[0]
                for start in range(0, len(x), float64.BATCH)]
        return np.concatenate(runs).reshape(len(x), -1)

    def _representable(self, x: np.ndarray) -> np.ndarray:
        return _representable(x, self.low, self.high)

    def _margin(self, witness: np.ndarray) -> tuple[float, str]:
        """Twice the rounding allowance at the witness: the derived bound, or the clean code's observed error."""
        if self.margin_rule is None:
            return 2.0 * float(bounds.derive(self.model, witness).bound.max()), "derived bound at the witness"
        return 2.0 * self.clean_error, f"clean code's largest observed error ({self.margin_rule})"


def domain_points(model: Model, rng: np.random.Generator, uniform: int) -> np.ndarray:
    """Candidate inputs of the domain (``model.domain_bounds``), as float64 rows each a float32 input: every corner
    (or ``CORNERS`` drawn from ``rng`` when there are more), the centre and ``uniform`` points drawn from ``rng``."""
    low, high = (b.reshape(-1) for b in model.domain_bounds())
    size = low.size
    if 2 ** size <= CORNERS:
        picks = np.array(list(itertools.product((0, 1), repeat=size)), dtype=bool)
    else:
        picks = rng.integers(0, 2, (CORNERS, size)).astype(bool)
    corners = np.where(picks, high, low)
    points = low + rng.random((uniform, size)) * (high - low)
    return _representable(np.vstack([corners, (low + high) / 2, points]), low, high)


def _representable(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``x`` clipped to the domain and rounded to float32 (what the C can be given), as float64 rows."""
    x = np.clip(np.atleast_2d(x), low, high).astype(np.float32).astype(np.float64)
    return np.clip(x, low, high)


def locate(constants: dict[str, np.ndarray], values: np.ndarray, position: int) -> tuple[str, tuple[int, ...]] | str:
    """The initialiser and element index the C array ``values``'s element ``position`` is: the one initialiser equal
    to ``values`` element for element, in its own order or in an order of its axes, else the one holding the same
    values in another order where that element's value occurs once (``_by_value``); else why none is."""
    found = set()
    for name, array in constants.items():
        if not np.issubdtype(array.dtype, np.floating) or array.size != values.size:
            continue
        narrow = array.astype(np.float32)
        for order in itertools.permutations(range(narrow.ndim)) if narrow.ndim <= 4 else [tuple(range(narrow.ndim))]:
            arranged = np.transpose(narrow, order)
            if np.array_equal(arranged.reshape(-1), values):
                where = np.unravel_index(position, arranged.shape)
                element = [0] * narrow.ndim
                for axis, index in zip(order, where):
                    element[axis] = int(index)
                found.add((name, tuple(element)))
                break
    names = sorted({name for name, _ in found})
    if not names:
        found = set(_by_value(constants, values, position))
        names = sorted({name for name, _ in found})
    if len(names) == 1:
        return next(iter(found))
    return f"initialisers {', '.join(names)} all hold the array's values" if names else \
        "no initialiser of the model's graph holds the array's values"


def _by_value(constants: dict[str, np.ndarray], values: np.ndarray, position: int):
    """The initialisers holding exactly the array's values in another order than one of its axes (a Keras Dense
    kernel after a Flatten of channels-last features, whose rows the export reorders channels first), with the one
    element equal to the array's element ``position`` when that value occurs once there."""
    wanted = np.sort(values)
    for name, array in constants.items():
        if not np.issubdtype(array.dtype, np.floating) or array.size != values.size:
            continue
        narrow = array.astype(np.float32)
        if np.array_equal(np.sort(narrow.reshape(-1)), wanted):
            (where,) = np.nonzero(narrow.reshape(-1) == values[position])
            if len(where) == 1:
                yield name, tuple(int(i) for i in np.unravel_index(int(where[0]), narrow.shape))


def annotate(results: list[dict], code: GeneratedCode, model: Model, atol: float, rtol: float, seed: int,
             clean_error: float) -> dict[str, np.ndarray]:
    """Add ``detectability`` to every weight mutant of ``results`` that was built (undecided, with the reason, when
    the model has no float64 evaluation or the weight is not found in it); return each searched mutant's witness
    by id (the stage runs the mutant's C on those beyond the tolerance but within the margin: ``run._confirm``)."""
    weights = [r for r in results if r.get("weight") and r["status"] != "stillborn"]
    witnesses: dict[str, np.ndarray] = {}
    if not weights:
        return witnesses
    try:
        search = Search(model, atol, rtol, seed, clean_error)
    except (ModelError, KeyError, ValueError) as exc:
        reason = f"no float64 evaluation of the model: {exc}"
        for result in weights:
            result["detectability"] = {"decided": False, "detectable": None, "reason": reason}
        return witnesses
    texts: dict[str, str] = {}
    values: dict[tuple[str, str], np.ndarray] = {}  # (file, symbol) -> the array's values, read once
    for result in weights:
        weight = result["weight"]
        if weight["mutated"] == weight["value"]:
            result["detectability"] = {"decided": True, "detectable": False, "beyond_tolerance": False,
                                       "difference": 0.0,
                                       "reason": "the value is unchanged in float32"}
            continue
        text = texts.setdefault(result["file"], (code.directory / result["file"]).read_text())
        array = values.setdefault((result["file"], weight["symbol"]), operators.array_values(text, weight["symbol"]))
        place = locate(search.evaluator.constants, array, weight["index"])
        if isinstance(place, str):
            result["detectability"] = {"decided": False, "detectable": None, "reason": place}
            continue
        found, witnesses[result["id"]] = search.decide(int(result["id"][1:]), place[0], place[1], weight["mutated"])
        result["detectability"] = {**found, "initialiser": place[0], "element": list(place[1])}
    return witnesses
