"""The ranking run configuration, derived from core's ``RankingConfig``, checked when a run starts (raw_dump)."""

from __future__ import annotations

from typing import Any, get_args, get_origin

import dagster as dg
from pydantic import ValidationError, create_model
from pydantic.fields import FieldInfo

from arena_pipeline.core.ranking import RUN_SETTINGS, RankingConfig

#: The op whose run configuration this is (``{"ops": {"rankings": {"config": {...}}}}``).
RANKINGS_OP = "rankings"


class _RankingRunSettings(dg.Config):
    def ranking_config(self) -> RankingConfig:
        """The run's settings as core's ``RankingConfig`` (its cross-field rules checked now)."""
        return RankingConfig.from_settings(self.model_dump())


def _run_field(name: str) -> tuple[Any, FieldInfo]:
    """``RankingConfig``'s field as it stands (type, default, bounds, validators, description); a tuple
    becomes a list, the only sequence Dagster's config system knows."""
    info = RankingConfig.__pydantic_fields__[name]
    if get_origin(info.annotation) is tuple:
        return list[get_args(info.annotation)[0]], FieldInfo.merge_field_infos(info, default=list(info.default))
    return info.annotation, info


#: Settings of the leaderboards (run configuration; the defaults are LMArena's conventions): the
#: :data:`~arena_pipeline.core.ranking.RUN_SETTINGS` of ``RankingConfig``, each with its type, default,
#: bounds and description from there, so the launchpad shows them and a bad value fails at launch.
RankingRunConfig = create_model(
    "RankingRunConfig", __base__=_RankingRunSettings, __module__=__name__,
    __doc__="Settings of the leaderboards (run configuration; the defaults are LMArena's conventions).",
    **{name: _run_field(name) for name in RUN_SETTINGS},
)


def run_config_of(config: RankingConfig) -> dict[str, Any]:
    """The run configuration that ranks with ``config`` (its :data:`RUN_SETTINGS`), as the ``rankings``
    op takes it: what a refresh gives a run so that it ranks as the live publication did."""
    return RankingRunConfig(**{name: getattr(config, name) for name in RUN_SETTINGS}).model_dump()


def config_problems(exc: ValidationError) -> str:
    """A pydantic validation error in one line: ``field: why`` per problem, ``; `` between them."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error.get("loc", ())) or "config"
        message = error.get("msg", "")
        parts.append(f"{field}: {message.removeprefix('Value error, ')}")
    return "; ".join(parts)


def check_ranking_run_config(run_config: dict[str, Any] | None) -> _RankingRunSettings:
    """The run's ``rankings`` settings, validated now (a run with a setting out of range must fail at
    its first step, before the fetch and the load, not at the rankings step minutes later).

    Raises
    ------
    ValueError
        One line naming the op, each bad field and why (with the memory or time a size setting
        would need).
    """
    ops = (run_config or {}).get("ops") or {}
    settings = (ops.get(RANKINGS_OP) or {}).get("config") or {}
    try:
        config = RankingRunConfig(**settings)
        config.ranking_config()  # the cross-field rules (a bootstrap interval without rounds, ...)
    except ValidationError as exc:
        raise ValueError(f"run config of {RANKINGS_OP!r} refused before anything is fetched: "
                         f"{config_problems(exc)}") from None
    return config
