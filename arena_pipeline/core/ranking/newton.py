"""A batched damped Newton method for the smooth convex objectives of the rating fits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: ``fun(x, with_derivatives)`` returns ``(f, grad, hess)``: f of shape (B,), and when
#: ``with_derivatives`` the gradient (B, k) and a positive definite step matrix (B, k, k).
Objective = Callable[[np.ndarray, bool], tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]


@dataclass(frozen=True)
class NewtonResult:
    """Outcome of :func:`newton_minimize`.

    Attributes
    ----------
    x
        Minimisers, shape (B, k).
    iterations
        Newton steps taken (the same for the whole batch).
    grad_norm
        Euclidean norm of the gradient at ``x``, shape (B,).
    converged
        ``grad_norm < tol`` per problem, shape (B,).
    """

    x: np.ndarray
    iterations: int
    grad_norm: np.ndarray
    converged: np.ndarray


def newton_minimize(fun: Objective, x0: np.ndarray, tol: float, max_iter: int) -> NewtonResult:
    """Minimise a batch of independent convex objectives by Newton's method.

    Each step solves ``hess @ step = -grad`` and, for problems where the full step fails
    the Armijo condition (constant 1e-4), halves it until it passes, so the method
    converges from any start on a convex objective; near the optimum full steps
    converge quadratically. The derivatives at an accepted full step are reused.

    Parameters
    ----------
    fun
        The batched objective, see :data:`Objective`. The step matrix is the Hessian,
        possibly plus a term along a direction in which both the objective and the
        iterates are constant (the Bradley-Terry fits add ``c 11^T`` on the rating block).
    x0
        Starting points, shape (B, k).
    tol
        Stop when every gradient's Euclidean norm is below ``tol``.
    max_iter
        Maximum number of Newton steps.

    Returns
    -------
    NewtonResult
    """
    x = np.array(x0, dtype=float, copy=True)
    f, grad, hess = fun(x, True)
    norms = np.linalg.norm(grad, axis=1)
    iterations = 0
    while iterations < max_iter and np.any(norms >= tol):
        step = np.linalg.solve(hess, -grad[..., None])[..., 0]
        slope = np.einsum("bk,bk->b", grad, step)  # negative: a descent direction
        slack = 1e-12 * np.abs(f)  # rounding noise near the optimum
        f_new, grad_new, hess_new = fun(x + step, True)  # the full step usually passes
        ok = f_new <= f + 1e-4 * slope + slack
        if ok.all():
            x, f, grad, hess = x + step, f_new, grad_new, hess_new
        else:
            t = np.where(ok, 1.0, 0.5)
            for _ in range(60):
                ok = fun(x + t[:, None] * step, False)[0] <= f + 1e-4 * t * slope + slack
                if ok.all():
                    break
                t = np.where(ok, t, t / 2.0)
            x = x + t[:, None] * step
            f, grad, hess = fun(x, True)
        norms = np.linalg.norm(grad, axis=1)
        iterations += 1
    return NewtonResult(x=x, iterations=iterations, grad_norm=norms, converged=norms < tol)
