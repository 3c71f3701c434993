"""Elementwise activation functions as C expressions (Definition 4 of the paper).

``EXPRESSIONS`` maps an activation name to a function of (C variable, params)
returning a float expression that reads the variable, never a statement, so
the same entry serves a fused epilogue and a standalone activation layer.
Softmax is not elementwise; it is an epilogue of its own (``layers.py``).
"""

from __future__ import annotations

import math

from codegen.cwriter import c_float


def _relu(v, p):
    return f"({v} > 0.0f ? {v} : 0.0f)"


def _leaky_relu(v, p):
    return f"({v} > 0.0f ? {v} : {c_float(p[0])} * {v})"


def _clip(v, p):
    """ONNX Clip: ``Min(max, Max(x, min))``, so a lower bound above the upper one gives the upper one."""
    low, high, below = c_float(p[0]), c_float(p[1]), c_float(min(p[0], p[1]))
    return f"({v} < {low} ? {below} : ({v} > {high} ? {high} : {v}))"


def hard_sigmoid(v: str, alpha: str, beta: str) -> str:
    """ONNX HardSigmoid ``max(0, min(1, alpha * x + beta))`` with C texts for alpha and beta (V1 reads fields)."""
    line = f"{alpha} * {v} + {beta}"
    return f"({line} > 1.0f ? 1.0f : ({line} < 0.0f ? 0.0f : {line}))"


def _hard_sigmoid(v, p):
    return hard_sigmoid(v, c_float(p[0]), c_float(p[1]))


def _keras_hard_sigmoid(v, p):
    """Keras 3 (TensorFlow backend) hard_sigmoid: ``relu6(x + 3) / 6``, its own rounding."""
    shifted = f"({v} + 3.0f)"
    return f"(({shifted} > 6.0f ? 6.0f : ({shifted} > 0.0f ? {shifted} : 0.0f)) / 6.0f)"


def _keras_relu(v, p):
    # keras.activations.relu(x, negative_slope, max_value, threshold):
    # x > threshold -> clip(x, 0, max_value), otherwise negative_slope * (x - threshold)
    slope, high, threshold = p
    positive = f"({v} > 0.0f ? {v} : 0.0f)"
    if high is not None:
        positive = f"({v} > {c_float(high)} ? {c_float(high)} : {positive})"
    if slope == 0.0:
        negative = "0.0f"
    elif threshold == 0.0:
        negative = f"{c_float(slope)} * {v}"
    else:
        negative = f"{c_float(slope)} * ({v} - {c_float(threshold)})"
    return f"({v} > {c_float(threshold)} ? {positive} : {negative})"


def _elu(v, p):
    return f"({v} > 0.0f ? {v} : {c_float(p[0])} * expm1f({v}))"


def _selu(v, p):
    alpha, scale = c_float(p[0]), c_float(p[1])
    return f"({v} > 0.0f ? {scale} * {v} : {scale} * ({alpha} * expm1f({v})))"


def _gelu(v, p):
    """ONNX Gelu ``approximate="none"`` and Keras ``gelu`` (approximate=False): ``0.5 x (1 + erf(x / sqrt 2))``,
    the spec's formula with erff (exact up to libm's ulp and the roundings the derived bound counts)."""
    return f"(0.5f * {v} * (1.0f + erff({v} * {c_float(math.sqrt(0.5))})))"


def _gelu_tanh(v, p):
    """ONNX Gelu ``approximate="tanh"`` and Keras ``gelu(approximate=True)``:
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, the spec's own formula."""
    inner = f"({v} + {c_float(0.044715)} * {v} * {v} * {v})"
    return f"(0.5f * {v} * (1.0f + tanhf({c_float(math.sqrt(2.0 / math.pi))} * {inner})))"


EXPRESSIONS = {
    "linear": lambda v, p: v,
    "relu": _relu,
    "relu6": lambda v, p: _clip(v, (0.0, 6.0)),
    "clip": _clip,
    "keras_relu": _keras_relu,
    "leaky_relu": _leaky_relu,
    "tanh": lambda v, p: f"tanhf({v})",
    "sigmoid": lambda v, p: f"1.0f / (1.0f + expf(-{v}))",
    "elu": _elu,
    "selu": _selu,
    "softplus": lambda v, p: f"(({v} > 0.0f ? {v} : 0.0f) + log1pf(expf(-fabsf({v}))))",
    "softsign": lambda v, p: f"{v} / (1.0f + fabsf({v}))",
    "silu": lambda v, p: f"{v} * (1.0f / (1.0f + expf(-{v})))",
    "exponential": lambda v, p: f"expf({v})",
    "hard_sigmoid": _hard_sigmoid,
    "hard_swish": lambda v, p: f"{v} * {_hard_sigmoid(v, p)}",
    "keras_hard_sigmoid": _keras_hard_sigmoid,
    "keras_hard_silu": lambda v, p: f"{v} * {_keras_hard_sigmoid(v, p)}",
    "log": lambda v, p: f"logf({v})",
    "sqrt": lambda v, p: f"sqrtf({v})",
    "neg": lambda v, p: f"(-{v})",
    "abs": lambda v, p: f"fabsf({v})",
    "reciprocal": lambda v, p: f"(1.0f / {v})",
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
}

# Math functions the generated code may call (the only calls it contains).
MATH_FUNCTIONS = ("expf", "expm1f", "tanhf", "log1pf", "fabsf", "logf", "sqrtf", "powf", "erff")


def expression(kind: str, params: tuple, var: str) -> str:
    return EXPRESSIONS[kind](var, params)
