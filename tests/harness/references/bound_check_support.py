"""A support module (no tests): the check every bound-rule test ends with, against exact arithmetic.

Each implementation's outputs must lie within the derived bound of the exact result, and the bound must not be
absurdly loose (at most ``LOOSEST`` times the worst error observed): a bound that always holds because it is huge
would pass the first half alone. The distance is the caller's (exact Decimal or Fraction values, rounded up)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

LOOSEST = 1e3  # bound / worst observed error above this is absurdly loose


def assert_within_and_tight(case: str, implementations: dict, exact, bound: np.ndarray,
                            distance: Callable[[np.ndarray, np.ndarray], np.ndarray],
                            record_property: Callable[[str, object], None] | None = None) -> float:
    """Every output of every implementation within ``bound`` of ``exact``, and ``bound`` at most ``LOOSEST`` times
    the worst error seen; the ratio, returned and printed, is also a JUnit property of the test when
    ``record_property`` is given."""
    worst = 0.0
    for name, got in implementations.items():
        far = distance(np.asarray(got, np.float64).reshape(bound.shape),
                       np.asarray(exact, dtype=object).reshape(bound.shape))
        outside = far > bound
        assert not outside.any(), (f"{case}, {name}: |{name} - exact| = {far[outside].max():.3e} above the bound "
                                   f"{bound[outside][np.argmax(far[outside])]:.3e}")
        worst = max(worst, float((far / np.where(bound > 0, bound, np.inf)).max()))
    ratio = 1 / worst if worst else np.inf
    if record_property is not None:
        record_property("bound_over_worst_observed", ratio)
    print(f"{case}: bound / worst observed error = {ratio:.3g}")
    assert ratio <= LOOSEST, f"{case}: the bound is {ratio:.3g} times the worst observed error"
    return ratio
