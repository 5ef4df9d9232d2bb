"""The leaderboard categories as data: one rule per category (seed and LMArena boards)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from arena_pipeline.core.dataset.dumps import dumps_of, unavailable_columns
from arena_pipeline.core.dataset.schema import CRITERIA
from arena_pipeline.core.labels import CATEGORY_NAMES, category_label, ordered_categories

__all__ = ["CATEGORY_NAMES", "CATEGORY_RULES", "RULES_BY_NAME", "CategoryRule", "category_label", "category_order",
           "ordered_categories", "tag_categories"]

RuleKind = Literal["all", "flag", "not_flag", "at_least", "greater_than", "in", "not_in"]


@dataclass(frozen=True)
class CategoryRule:
    """A category membership rule over columns of the battles table.

    Parameters
    ----------
    name
        Category name: the 8 seed categories of ``arena_pipeline.constants.CATEGORIES``,
        then LMArena's further boards (see ``data/category_map.csv`` for their names).
    kind
        ``"all"``: every battle; ``"flag"``: the single boolean column is true;
        ``"not_flag"``: it is false; ``"at_least"``: at least ``threshold`` of the
        boolean columns are true; ``"greater_than"``: the single numeric column is greater
        than ``threshold``; ``"in"`` / ``"not_in"``: the single string column's value is
        (is not) one of ``values`` (for ``language``, its primary subtag: ``zh-Hant`` is
        ``zh``).
    columns
        Battles columns the rule reads.
    threshold
        Count (``at_least``) or value (``greater_than``); unused otherwise.
    values
        Values of ``in`` / ``not_in``.
    also
        Further rules a member must also satisfy (a conjunction, e.g. hard and English).
    description
        One line for people, shown in metadata.

    Notes
    -----
    A null value never makes a battle a member: a null flag counts as false (for
    ``not_flag`` too: an unknown refusal is not "no refusal"), a null number is not
    greater than anything and a null string is in no set and outside none. Battles with
    such nulls are counted by :meth:`null_expr` so the caller can report them.
    """

    name: str
    kind: RuleKind
    columns: tuple[str, ...] = ()
    threshold: int = 0
    description: str = ""
    values: tuple[str, ...] = ()
    also: tuple[CategoryRule, ...] = ()

    @property
    def source_columns(self) -> tuple[str, ...]:
        """Every battles column the rule and its ``also`` rules read."""
        out = list(self.columns)
        for rule in self.also:
            out += [c for c in rule.source_columns if c not in out]
        return tuple(out)

    def _own_expr(self) -> pl.Expr:
        if self.kind == "all":
            return pl.lit(True)
        if self.kind == "flag":
            return pl.col(self.columns[0]).fill_null(False)
        if self.kind == "not_flag":
            return (~pl.col(self.columns[0])).fill_null(False)
        if self.kind == "at_least":
            flags = [pl.col(c).fill_null(False).cast(pl.Int32) for c in self.columns]
            return pl.sum_horizontal(flags) >= self.threshold
        if self.kind == "greater_than":
            return (pl.col(self.columns[0]) > self.threshold).fill_null(False)
        if self.kind in ("in", "not_in"):
            value = pl.col(self.columns[0])
            if self.columns[0] == "language":
                value = value.str.split("-").list.first()
            member = value.is_in(list(self.values))
            return (member if self.kind == "in" else ~member).fill_null(False)
        raise ValueError(f"unknown rule kind {self.kind!r}")

    def expr(self) -> pl.Expr:
        """Boolean expression, never null: is the battle in this category."""
        out = self._own_expr()
        for rule in self.also:
            out = out & rule.expr()
        return out

    def null_expr(self) -> pl.Expr:
        """Boolean expression: at least one of the rule's source values is null."""
        if not self.source_columns:
            return pl.lit(False)
        return pl.any_horizontal([pl.col(c).is_null() for c in self.source_columns])


_HARD = CategoryRule(
    "hard_prompt",
    "at_least",
    tuple(f"criteria_{c}" for c in CRITERIA),
    threshold=6,
    description="at least 6 of the 7 criteria_v0.1 flags are true",
)


def _language(name: str, code: str) -> CategoryRule:
    return CategoryRule(
        name,
        "in",
        ("language",),
        values=(code,),
        description=f"language is {code} (any {code}-* variant)",
    )


#: LMArena's text boards beyond the seed categories (its names in data/category_map.csv).
#: ``no_refusal`` reads ``is_refusal``, which the 140k dump does not carry: it is reported
#: unavailable there, never computed as "all battles".
LMARENA_RULES: tuple[CategoryRule, ...] = (
    _language("english", "en"),
    _language("chinese", "zh"),
    _language("french", "fr"),
    _language("german", "de"),
    _language("japanese", "ja"),
    _language("korean", "ko"),
    _language("russian", "ru"),
    _language("spanish", "es"),
    CategoryRule(
        "hard_prompt_english",
        "in",
        ("language",),
        values=("en",),
        also=(_HARD,),
        description="hard_prompt (at least 6 of the 7 criteria) and language en",
    ),
    CategoryRule(
        "no_short",
        "greater_than",
        ("sum_user_tokens",),
        threshold=4,
        description="conv_metadata.sum_user_tokens >= 5 (queries under 5 tokens excluded)",
    ),
    CategoryRule(
        "no_tie",
        "not_in",
        ("winner",),
        values=("tie", "both_bad"),
        description="winner is model_a or model_b (tie and both_bad battles dropped)",
    ),
    CategoryRule(
        "no_refusal",
        "not_flag",
        ("is_refusal",),
        description="is_refusal is false (needs a refusal field; the 140k dump has none)",
    ),
)

#: One rule per category: the seed categories in the order of ``constants.CATEGORIES``,
#: then :data:`LMARENA_RULES`.
CATEGORY_RULES: tuple[CategoryRule, ...] = (
    CategoryRule("overall", "all", description="every battle"),
    CategoryRule(
        "creative_writing",
        "flag",
        ("creative_writing",),
        description="category_tag creative_writing_v0.1.creative_writing is true",
    ),
    CategoryRule("math", "flag", ("math",), description="category_tag math_v0.1.math is true"),
    CategoryRule(
        "instruction_following",
        "flag",
        ("instruction_following",),
        description="category_tag if_v0.1.if is true",
    ),
    CategoryRule("coding", "flag", ("is_code",), description="is_code is true"),
    _HARD,
    CategoryRule(
        "longer_query",
        "greater_than",
        ("sum_user_tokens",),
        threshold=500,
        description="conv_metadata.sum_user_tokens > 500",
    ),
    CategoryRule("multi_turn", "greater_than", ("turns",), threshold=1, description="turns > 1"),
    *LMARENA_RULES,
)

RULES_BY_NAME: dict[str, CategoryRule] = {rule.name: rule for rule in CATEGORY_RULES}

if tuple(rule.name for rule in CATEGORY_RULES) != CATEGORY_NAMES:  # the plain copy of the order, for readers
    raise RuntimeError("core.labels.CATEGORY_NAMES must list the names of CATEGORY_RULES, in their order")


def tag_categories(
    battles: pl.DataFrame, id_column: str = "id"
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Assign battles to leaderboard categories.

    Parameters
    ----------
    battles
        The flat battles table (``schema.BATTLES_SCHEMA``); only ``id_column`` and the
        columns the rules read are used. Any subset of rule columns may be missing.
    id_column
        Column holding the battle id.

    Returns
    -------
    tuple[pl.DataFrame, dict]
        A long frame with columns ``battle_id`` (String) and ``category`` (String): one row
        per battle and category it belongs to, categories in :data:`CATEGORY_NAMES` order,
        battles in input order within a category. And a metadata dict keyed by category
        name, each value ``{"available": bool, "missing_columns": list[str],
        "battles": int | None, "null_as_false": int | None, "rule": str}`` where
        ``battles`` is the number of battles tagged and ``null_as_false`` the number of
        battles in which at least one of the rule's source values was null (treated as
        false). A category whose columns are missing is ``available=False`` with
        ``battles`` and ``null_as_false`` None and has no rows in the frame.

        With a ``dump`` column (several dumps in one table), ``unavailable_in`` lists the dumps
        whose format lacks a column the rule reads (``core/dataset/dumps.py``): their battles are in no
        such category and are not counted in ``null_as_false``; a category every loaded dump
        lacks is ``available=False``.
    """
    gaps = unavailable_columns(battles)
    lacking = {rule.name: sorted(d for d, cols in gaps.items() if set(rule.source_columns) & set(cols))
               for rule in CATEGORY_RULES}
    all_dumps = set(dumps_of(battles))
    available = [
        rule for rule in CATEGORY_RULES if all(c in battles.columns for c in rule.source_columns)
        and not (all_dumps and set(lacking[rule.name]) >= all_dumps)
    ]

    def counted_nulls(rule: CategoryRule) -> pl.Expr:
        if not lacking[rule.name]:
            return rule.null_expr()
        return rule.null_expr() & ~pl.col("dump").is_in(lacking[rule.name]).fill_null(False)

    flags = battles.select(
        pl.col(id_column).cast(pl.String).alias("battle_id"),
        *[rule.expr().alias(rule.name) for rule in available],
        *[counted_nulls(rule).alias(f"__null_{rule.name}") for rule in available],
    )
    counts = flags.drop("battle_id").sum().row(0, named=True) if available else {}

    metadata: dict[str, Any] = {}
    for rule in CATEGORY_RULES:
        missing = [c for c in rule.source_columns if c not in battles.columns]
        is_available = rule in available
        metadata[rule.name] = {
            "available": is_available,
            "missing_columns": missing,
            "battles": int(counts[rule.name]) if is_available else None,
            "null_as_false": int(counts[f"__null_{rule.name}"]) if is_available else None,
            "rule": rule.description,
        }
        if gaps:
            metadata[rule.name]["unavailable_in"] = lacking[rule.name]

    if not available:
        return pl.DataFrame(schema={"battle_id": pl.String, "category": pl.String}), metadata
    long = (
        flags.select("battle_id", *[rule.name for rule in available])
        .unpivot(index="battle_id", variable_name="category", value_name="member")
        .filter(pl.col("member"))
        .select("battle_id", pl.col("category").cast(pl.String))
    )
    return long, metadata


def category_order(column: str = "category") -> pl.Expr:
    """Sort key of :func:`ordered_categories` as an expression (use with the name as a tie-break)."""
    return pl.col(column).replace_strict(
        {c: i for i, c in enumerate(CATEGORY_NAMES)}, default=len(CATEGORY_NAMES),
        return_dtype=pl.Int32,
    )

