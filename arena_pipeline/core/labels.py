"""Board order and people-facing names of the categories and ranking methods, in plain Python for fast readers."""

from __future__ import annotations

from collections.abc import Iterable

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core import method_catalogue
from arena_pipeline.core.method_registry import RATING_METHODS

#: Every category name, in board order: the seed categories of ``constants.CATEGORIES``, then LMArena's
#: further boards. ``core.dataset.categories`` holds one rule per name, in this order (it checks so on import);
#: this copy imports no Polars, so the CLI's read path can order and label boards without it.
CATEGORY_NAMES: tuple[str, ...] = (
    *CATEGORIES,
    "english", "chinese", "french", "german", "japanese", "korean", "russian", "spanish",
    "hard_prompt_english", "no_short", "no_tie", "no_refusal",
)

#: The built-in ranking methods, in board order (``core.method_catalogue``, generated from their classes).
METHODS: tuple[str, ...] = method_catalogue.METHODS
#: People-facing names of the built-in ranking methods (:func:`method_label`).
METHOD_LABELS: dict[str, str] = method_catalogue.LABELS
#: What a reader must know about a method before reading its ratings (:func:`method_note`).
METHOD_NOTES: dict[str, str] = method_catalogue.NOTES
#: The primary method (``RatingMethod.role`` "primary"): the boards the gate compares, the default and
#: headline board of the CLI, the report and the previews.
PRIMARY_METHOD: str = method_catalogue.ROLES["primary"][0]
#: The methods whose fit reads the battles' style counts (role "style"), compared with the primary one.
STYLE_METHODS: tuple[str, ...] = method_catalogue.ROLES.get("style", ())


def ordered_categories(names: Iterable[str]) -> list[str]:
    """Distinct ``names`` in board order: :data:`CATEGORY_NAMES` order, unknown names after
    (alphabetically). The one place the order of categories is decided."""
    present = set(names)
    return [c for c in CATEGORY_NAMES if c in present] + sorted(present - set(CATEGORY_NAMES))


def ordered_methods(names: Iterable[str]) -> list[str]:
    """Distinct ``names`` in board order (:data:`METHODS`, then further registered methods in registration
    order), unknown names after (alphabetically)."""
    present = set(names)
    order = [*METHODS, *(m for m in RATING_METHODS if m not in METHODS)]
    return [m for m in order if m in present] + sorted(present - set(order))


def category_label(name: str) -> str:
    """People-facing name: ``"instruction_following"`` -> ``"Instruction following"``."""
    text = name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


#: How a provisional model's rank is written (:func:`rank_label`).
PROVISIONAL_RANK = "prov. {rank}"


def rank_label(rank: int | None, provisional: bool | None = False) -> str:
    """A rank as people read it: ``"2"`` for a shown model, ``"prov. 2"`` for a provisional one.

    A provisional model's rank is its place among every model of the board (shown and provisional),
    not a place in the shown ranking, so a provisional rank 2 and a shown rank 2 can sit on one
    board; the mark keeps the two numberings apart wherever a rank is printed (the CLI, the report,
    the Markdown previews). ``"–"`` without a rank.
    """
    if rank is None:
        return "–"
    return PROVISIONAL_RANK.format(rank=rank) if provisional else str(rank)


#: What each rank set states, in the words the CLI and the report print (``arena.leaderboard``'s
#: rank_ub/rank_lb and rank_ub_simultaneous/rank_lb_simultaneous).
RANK_SETS = {
    "per_model": "Spread: the ranks this model's own pairwise tests leave it (rank_ub-rank_lb; 95% for this "
                 "model alone, LMArena's rank spread: on about one board in four some model's true rank is "
                 "outside its spread)",
    "simultaneous": "All at once: the ranks left when every pairwise claim on the board holds together "
                    "(rank_ub_simultaneous-rank_lb_simultaneous; 95% for every model at once)",
}


def rank_set_label(best: int | None, worst: int | None) -> str:
    """A rank set as people read it: ``"2-5"``, ``"3"`` when it is one rank, ``"–"`` without bounds
    (a board published before the column)."""
    if best is None or worst is None:
        return "–"
    return str(best) if best == worst else f"{best}-{worst}"


def method_label(method: str) -> str:
    """People-facing name of a ranking method: its class's ``label`` when it is registered in this process,
    else the built-in one's (:data:`METHOD_LABELS`), an unknown one as it is."""
    registered = RATING_METHODS.get(method)
    return registered.label if registered is not None else METHOD_LABELS.get(method, method)


def method_note(method: str) -> str | None:
    """What to know before reading a method's ratings (its class's ``note``, :data:`METHOD_NOTES`), or None."""
    registered = RATING_METHODS.get(method)
    return registered.note if registered is not None else METHOD_NOTES.get(method)
