"""FastChat's own Bradley-Terry fit (fschat 0.2.36, ``compute_elo_mle_with_tie``) as an independent reference.

LMArena's leaderboard code lives in FastChat (``fastchat/serve/monitor/elo_analysis.py``). The
newest release on PyPI, fschat 0.2.36 (Apache-2.0), fits Bradley-Terry there with
``compute_elo_mle_with_tie``: every battle is duplicated, a tie (``tie`` or ``tie (bothbad)``)
becomes one win for each side, and scikit-learn's ``LogisticRegression(fit_intercept=False)``
is fitted on the ±ln(10) design (the ``compute_bt`` of FastChat's later, unreleased code fits
the same likelihood). Importing ``fastchat.serve.monitor.elo_analysis`` pulls in
``fastchat.model``, i.e. torch and transformers; so the function's definition is compiled from
the installed module's source, unchanged, in a namespace holding what it uses (``np``, ``pd``,
``math``; it imports scikit-learn itself).

Two things to know when comparing with it:

- The 140k dump writes a both-bad tie as ``both_bad``; FastChat spells it ``tie (bothbad)`` and
  would count ``both_bad`` as a win of model_b. :func:`fastchat_battles` renames it.
- A self-battle (same model on both sides) gets one design column written twice (+ln 10, then
  -ln 10), so it is not a tie with itself; LMArena's cleaning drops such battles and so does
  our fit: :func:`fastchat_battles` leaves them out.
- Its ``LogisticRegression()`` keeps scikit-learn's defaults: an L2 penalty with ``C=1`` and
  ``tol=1e-4``, which stops lbfgs after about 11 iterations on the real votes (up to 16 rating
  points from the optimum). :func:`converged` runs the same function with the penalty removed and
  lbfgs run to convergence, i.e. the maximum-likelihood fit that the method intends.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

FASTCHAT_FUNCTION = "compute_elo_mle_with_tie"


def fastchat_source() -> Path:
    """The installed ``fastchat/serve/monitor/elo_analysis.py`` (fschat, the ``dev`` extra)."""
    spec = importlib.util.find_spec("fastchat")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fschat is not installed: pip install -e '.[dev]'")
    return Path(spec.submodule_search_locations[0]) / "serve" / "monitor" / "elo_analysis.py"


def fastchat_fit() -> Callable[[pd.DataFrame], pd.Series]:
    """FastChat's ``compute_elo_mle_with_tie``, compiled unchanged from the installed source."""
    path = fastchat_source()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FASTCHAT_FUNCTION]
    namespace = {"np": np, "pd": pd, "math": math}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[FASTCHAT_FUNCTION]


@contextlib.contextmanager
def converged() -> Iterator[None]:
    """Within the block, FastChat's ``LogisticRegression()`` is unpenalised and run to convergence.

    The function imports ``sklearn.linear_model.LogisticRegression`` when called; the block swaps
    that name for a subclass whose defaults are ``C=1e12`` (no effective penalty), ``tol=1e-12``
    and ``max_iter=10_000``. Everything else (design, weights, duplication, tie rule) is FastChat's.
    """
    import sklearn.linear_model as linear_model

    original = linear_model.LogisticRegression

    class ToConvergence(original):  # type: ignore[misc, valid-type]
        __doc__ = original.__doc__

        def __init__(self, **kwargs):
            kwargs = {"C": 1e12, "tol": 1e-12, "max_iter": 10_000, **kwargs}
            super().__init__(**kwargs)

    # scikit-learn's get_params reads the signature of __init__: keep the original one
    ToConvergence.__init__.__signature__ = inspect.signature(original.__init__)
    linear_model.LogisticRegression = ToConvergence
    try:
        yield
    finally:
        linear_model.LogisticRegression = original


def fastchat_battles(battles: pl.DataFrame, models: list[str]) -> pd.DataFrame:
    """``model_a``/``model_b``/``winner`` of the battles among ``models``, in FastChat's spelling."""
    keep = pl.Series(models).implode()
    frame = battles.filter(
        pl.col("model_a").is_in(keep)
        & pl.col("model_b").is_in(keep)
        & (pl.col("model_a") != pl.col("model_b"))
    ).select(
        pl.col("model_a").cast(pl.String),
        pl.col("model_b").cast(pl.String),
        pl.col("winner").cast(pl.String).replace({"both_bad": "tie (bothbad)"}),
    )
    return frame.to_pandas()


def centred(ratings: dict[str, float] | pd.Series) -> dict[str, float]:
    """Ratings minus their mean (boards are comparable only up to a constant)."""
    values = dict(ratings)
    mean = sum(values.values()) / len(values)
    return {m: v - mean for m, v in values.items()}
