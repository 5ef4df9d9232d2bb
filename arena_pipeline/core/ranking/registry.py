"""The rating methods by name: ``rating_method.register`` fills it, the settings check names against it.

It sits below every module of the ranking step (it imports none): ``types.RankingConfig`` validates
``methods`` against it, while the methods themselves (``rating_method.RatingMethod``) need the board
types that the settings are below. So its entries are typed loosely here;
``rating_method.RATING_METHODS`` is the same dict, typed.
"""

from __future__ import annotations

from typing import Any

#: name -> registered ``rating_method.RatingMethod`` instance, in registration order (the order of the boards).
RATING_METHODS: dict[str, Any] = {}


def configured_methods(names: tuple[str, ...]) -> list[Any]:
    """The registered methods among ``names``, in registration order.

    Raises
    ------
    ValueError
        A name that is not registered, or no name.
    """
    unknown = set(names) - set(RATING_METHODS)
    if unknown or not names:
        raise ValueError(f"methods must be a non-empty subset of {tuple(RATING_METHODS)}, got {names}")
    return [method for name, method in RATING_METHODS.items() if name in names]
