"""The `RatingMethod` interface every ranking method implements, and the registry of methods by name.

A method is one class: its ``name`` (the ``method`` column of the leaderboard), the battle columns it
needs, the :class:`~arena_pipeline.core.ranking.types.RankingConfig` settings it reads, and
``fit(board) -> BoardResult`` on one category's board. ``@register`` puts an instance in
:data:`RATING_METHODS`; ``compute_rankings`` runs the configured ones in registration order (the
built-in ones are registered in ``core.ranking.methods``, in board order). The registry's dict is
``core.ranking.registry``'s, which the settings validate ``methods`` against.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from arena_pipeline.core.labels import method_label, method_note
from arena_pipeline.core.ranking import registry
from arena_pipeline.core.ranking.board import CategoryBoard
from arena_pipeline.core.ranking.registry import configured_methods

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
    settings
        The ``RankingConfig`` fields the method reads (beyond the board's shared ones: ties,
        ``min_battles``, anchoring, ``display_min_battles``, ``scale``/``base``, ``confidence``).
    summary
        Key of ``RankingOutput.metadata`` where the run keeps each category's
        ``BoardResult.summary`` (None: the method has none).
    needs
        What the battle columns of :meth:`battle_columns` are, for the error naming missing ones.
    """

    name: ClassVar[str]
    settings: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str | None] = None
    needs: ClassVar[str] = "more battle columns"

    @property
    def label(self) -> str:
        """People-facing name (``core.labels.method_label``; a method may set its own)."""
        return method_label(self.name)

    @property
    def note(self) -> str | None:
        """What a reader must know before reading its ratings (``core.labels.method_note``), or None."""
        return method_note(self.name)

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
RATING_METHODS: dict[str, RatingMethod] = registry.RATING_METHODS

M = TypeVar("M", bound=type[RatingMethod])


def register(cls: M) -> M:
    """Class decorator: register an instance of ``cls`` under ``cls.name`` (a name once only)."""
    if cls.name in RATING_METHODS:
        raise ValueError(f"a rating method named {cls.name!r} is already registered")
    RATING_METHODS[cls.name] = cls()
    return cls
