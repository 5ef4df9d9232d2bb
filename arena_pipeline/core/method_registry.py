"""The rating methods by name, filled by ``core.ranking.rating_method.register``; imports nothing, so the CLI reads it.

The settings validate ``methods`` against it, ``core.labels`` names a registered method by its class's
label, and everything outside ``core/ranking/`` that needs a particular method reaches it by its role
(``core.labels.PRIMARY_METHOD``, ``STYLE_METHODS``), never by its name. Entries are typed loosely here
(this module sits below the ranking step); ``rating_method.RATING_METHODS`` is the same dict, typed.
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
