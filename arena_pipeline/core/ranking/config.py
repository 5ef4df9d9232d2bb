"""The ranking step's settings: the shared ones (``types.RankingSettings``) and each registered method's own.

A method declares its own settings once, in its class (``RatingMethod.settings``); :func:`config_class`
makes the settings class of a set of methods, and :data:`RankingConfig` is that of the methods registered
when the ranking step is imported (the built-in ones). :data:`RUN_SETTINGS` (the settings a pipeline run
chooses, the ``rankings`` op's run configuration) are the shared ones a run chooses and the methods' own
declared with ``run``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as pydantic_dataclass

from arena_pipeline.core.ranking import methods as _methods  # noqa: F401 - registers the built-in methods
from arena_pipeline.core.ranking.rating_method import RATING_METHODS, RatingMethod
from arena_pipeline.core.ranking.types import SHARED_RUN_SETTINGS, RankingSettings


def config_class(methods: Iterable[RatingMethod]) -> type[RankingSettings]:
    """The settings class of ``methods``: :class:`~types.RankingSettings`' fields, then each method's own
    (``RatingMethod.settings``), in the methods' order.

    Raises
    ------
    ValueError
        Two methods, or a method and the shared settings, declaring one name.
    """
    shared = {f.name for f in dataclasses.fields(RankingSettings)}
    own: dict[str, tuple[str, object]] = {}
    for method in methods:
        for name, setting in method.settings.items():
            if name in shared or name in own:
                raise ValueError(f"{method.name}: setting {name!r} is already declared")
            own[name] = (setting.annotation, copy.copy(setting.field))
    namespace = {
        "__module__": __name__, "__qualname__": "RankingConfig",
        "__doc__": "Settings of ``compute_rankings``: the shared ones (``types.RankingSettings``) and the "
                   f"methods' own ({', '.join(own) or 'none'}, declared in their classes).",
        "__annotations__": {name: annotation for name, (annotation, _) in own.items()},
        **{name: field for name, (_, field) in own.items()},
    }
    return pydantic_dataclass(type("RankingConfig", (RankingSettings,), namespace), frozen=True,
                              config=ConfigDict(defer_build=True))


def run_settings(methods: Iterable[RatingMethod]) -> tuple[str, ...]:
    """The settings a pipeline run chooses: the shared ones (``types.SHARED_RUN_SETTINGS``), then the
    methods' own declared with ``run``."""
    return (*SHARED_RUN_SETTINGS, *(name for m in methods for name, s in m.settings.items() if s.run))


#: The settings of the registered methods (the built-in ones): ``compute_rankings``' ``config``.
RankingConfig = config_class(RATING_METHODS.values())
#: The settings a pipeline run chooses (the ``rankings`` op's run configuration, which a refresh carries
#: over from the live publication); the others keep their defaults.
RUN_SETTINGS: tuple[str, ...] = run_settings(RATING_METHODS.values())
