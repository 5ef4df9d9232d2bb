"""The `RatingMethod` interface every ranking method implements, and the registry of methods by name.

A method is one class: its ``name`` (the ``method`` column of the leaderboard), the battle columns it
needs, its own settings (``settings``, fields of ``config.RankingConfig``) and the shared ones it reads, and
``fit(board) -> BoardResult`` on one category's board. ``@register`` puts an instance in
:data:`RATING_METHODS`; ``compute_rankings`` runs the configured ones in registration order (the
built-in ones are registered in ``core.ranking.methods``, in board order). The registry's dict is
``core.method_registry``'s, which the settings validate ``methods`` against and ``core.labels`` reads
labels from; the built-in methods' names, roles and labels are also written out, for readers that load
no ranking code, in the generated ``core.method_catalogue`` (``core.ranking.catalogue``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from arena_pipeline.core import method_registry
from arena_pipeline.core.method_registry import configured_methods
from arena_pipeline.core.ranking.board import CategoryBoard
from arena_pipeline.core.ranking.types import Setting

if TYPE_CHECKING:
    import polars as pl

__all__ = ["RATING_METHODS", "BoardResult", "RatingMethod", "configured_methods", "register"]


@dataclass(frozen=True)
class BoardResult:
    """What one method makes of one category's board.

    Attributes
    ----------
    leaderboard
        The board's rows (``types.LEADERBOARD_SCHEMA``, ``method`` = the method's name; ``Board.frame``
        makes them from ratings and intervals), or None: the category has no board of this method.
    significance
        Its pairwise significance rows (``board.PAIRWISE_SIGNIFICANCE_SCHEMA``), or None.
    info
        Fit details, kept in ``metadata["categories"][category][name]``.
    coefficients
        Covariate coefficient rows (``types.STYLE_COEFFICIENTS_SCHEMA``) of a method that fits
        covariates, or None.
    summary
        One value for the whole run's metadata: ``metadata[method.summary][category]`` (e.g. the
        spectral board's Kendall tau against Bradley-Terry), or None for none.
    """

    leaderboard: pl.DataFrame | None
    significance: pl.DataFrame | None = None
    info: dict[str, Any] = field(default_factory=dict)
    coefficients: pl.DataFrame | None = None
    summary: Any = None


class RatingMethod(ABC):
    """A ranking method: ratings and intervals of one category's models from its battles.

    Class attributes
    ----------------
    name
        Registry key and the leaderboard's ``method`` value.
    label
        People-facing name (the CLI, the report); the name itself unless set.
    note
        What a reader must know before reading its ratings, or None.
    role
        What the rest of the pipeline uses it for, if anything: ``"primary"`` (the board the gate
        compares, the default and headline board; one method), ``"style"`` (a fit that reads the
        battles' style counts, compared with the primary board in the report), or None.
    settings
        The method's own settings, declared here once (``types.Setting``: type, ``pydantic.Field``,
        whether a run chooses it): ``config.RankingConfig`` has them as fields, the run's settings
        record (``dataclasses.asdict`` of it) carries them, and those with ``run`` are run settings
        (``config.RUN_SETTINGS``, the launchpad). ``board.config`` holds their values.
    reads
        The shared settings (``types.RankingSettings``) the method reads beyond every board's (ties,
        ``min_battles``, anchoring, ``display_min_battles``, ``scale``/``base``, ``confidence``).
    summary
        Key of ``RankingOutput.metadata`` where the run keeps each category's
        ``BoardResult.summary`` (None: the method has none).
    needs
        What the battle columns of :meth:`battle_columns` are, for the error naming missing ones.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    note: ClassVar[str | None] = None
    role: ClassVar[str | None] = None
    settings: ClassVar[dict[str, Setting]] = {}
    reads: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str | None] = None
    needs: ClassVar[str] = "more battle columns"

    def setting(self, board: CategoryBoard, name: str) -> Any:
        """The value of the method's own setting ``name`` on ``board``: its config's, or the declared default
        when the config's class was made without the method (``config.config_class``; a method registered
        after the ranking step was imported, as a test's)."""
        field = self.settings[name].field
        default = field.default_factory() if field.default_factory is not None else field.default
        return getattr(board.board.config, name, default)

    def battle_columns(self) -> list[str]:
        """Columns of the battles table the method needs besides ``id``, the models and ``winner``."""
        return []

    def battle_features(self) -> list[pl.Expr]:
        """Per-battle columns computed once from the battles before the boards (``CategoryBoard.part``)."""
        return []

    @abstractmethod
    def fit(self, board: CategoryBoard) -> BoardResult:
        """The method's board of one category (``board.board`` holds the battles and settings)."""


#: The registered methods by name, in registration order (the order of the boards): ``registry.RATING_METHODS``.
RATING_METHODS: dict[str, RatingMethod] = method_registry.RATING_METHODS

M = TypeVar("M", bound=type[RatingMethod])


def register(cls: M) -> M:
    """Class decorator: register an instance of ``cls`` under ``cls.name`` (a name once only)."""
    if cls.name in RATING_METHODS:
        raise ValueError(f"a rating method named {cls.name!r} is already registered")
    if cls.role == "primary" and any(m.role == "primary" for m in RATING_METHODS.values()):
        raise ValueError(f"{cls.name!r}: a primary rating method is already registered")
    if not hasattr(cls, "label"):
        cls.label = cls.name
    RATING_METHODS[cls.name] = cls()
    return cls
