"""arena.preference_pairs, defined once: the pairs of a batch of nested dump rows, made while the dump loads."""

from __future__ import annotations

import polars as pl

from arena_pipeline.core.dataset.categories import category_order, tag_categories
from arena_pipeline.core.ingest.flatten import content_images, content_text

#: Role markers of the text rendering of the pairs.
ROLE_MARKERS: dict[str, str] = {"user": "User", "assistant": "Assistant", "system": "System"}

#: Separator between rendered messages.
MESSAGE_SEPARATOR = "\n\n"

#: The columns of a preference pair (arena.preference_pairs without its ``dump_revision``).
PAIR_COLUMNS: dict[str, pl.DataType] = {
    "battle_id": pl.String(),
    "prompt": pl.String(),
    "chosen": pl.String(),
    "rejected": pl.String(),
    "chosen_model": pl.String(),
    "rejected_model": pl.String(),
    "chosen_side": pl.String(),
    "turns": pl.Int32(),
    "language": pl.String(),
    "timestamp": pl.Datetime("us"),
    "categories": pl.List(pl.String()),
    "has_images": pl.Boolean(),
}

#: Columns and types of :func:`pair_rows`: arena.preference_pairs as published.
PAIR_ROWS_SCHEMA: dict[str, pl.DataType] = {**PAIR_COLUMNS, "dump_revision": pl.String()}


def _marker(role: pl.Expr) -> pl.Expr:
    """The rendering's name of a role: the known ones mapped, others title-cased word by word, null 'Unknown'."""
    titled = role.str.split(" ").list.eval(
        pl.element().str.slice(0, 1).str.to_uppercase() + pl.element().str.slice(1).str.to_lowercase()
    ).list.join(" ")
    mapped = pl.when(role == "user").then(pl.lit(ROLE_MARKERS["user"]))
    for name in ("assistant", "system"):
        mapped = mapped.when(role == name).then(pl.lit(ROLE_MARKERS[name]))
    return mapped.otherwise(titled).fill_null("Unknown")


def _rendered(column: str) -> pl.Expr:
    """Each message of a conversation as ``"<Marker>: <text>"`` (text parts joined as in arena.messages)."""
    message = pl.element()
    text = content_text(message.struct.field("content"))
    return pl.col(column).list.eval(
        pl.concat_str([_marker(message.struct.field("role")), pl.lit(": "), text.fill_null("")])
    )


def _has_image(column: str) -> pl.Expr:
    """Whether any message of a conversation has an image part."""
    return pl.col(column).list.eval(
        content_images(pl.element().struct.field("content")).list.len().fill_null(0) > 0
    ).list.any()


def _first_user(column: str) -> tuple[pl.Expr, pl.Expr]:
    """(whether the conversation has a user message, the position of its first one)."""
    is_user = pl.col(column).list.eval(pl.element().struct.field("role") == "user")
    return is_user.list.any().fill_null(False), is_user.list.arg_max()


def _categories(battles: pl.DataFrame) -> pl.DataFrame:
    """battle_id -> its categories in board order (the rules of ``core.dataset.categories``)."""
    tags, _ = tag_categories(battles)
    return (tags.sort(category_order(), "category")
            .group_by("battle_id", maintain_order=True).agg(pl.col("category").alias("categories")))


def _sides(frame: pl.DataFrame) -> pl.DataFrame:
    """Per vote (``id``): each side's messages rendered as text, where its first user message is (and
    whether it has one), and whether either side has an image."""
    user_a, first_a = _first_user("conversation_a")
    user_b, first_b = _first_user("conversation_b")
    return frame.select(
        pl.col("id"),
        rendered_a=_rendered("conversation_a"),
        rendered_b=_rendered("conversation_b"),
        images=_has_image("conversation_a").fill_null(False) | _has_image("conversation_b").fill_null(False),
        user_a=user_a, first_a=first_a, user_b=user_b, first_b=first_b,
    )


def _pick(if_a: pl.Expr, if_b: pl.Expr) -> pl.Expr:
    """``if_a`` where side a won the vote, else ``if_b``."""
    return pl.when(pl.col("winner") == "model_a").then(if_a).otherwise(if_b)


def _texts() -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """The prompt, chosen and rejected messages (lists of rendered messages) over :func:`_sides`' columns:
    the winning side's messages up to its first user message, then each side's later messages."""
    own, other = (pl.col("rendered_a"), pl.col("first_a")), (pl.col("rendered_b"), pl.col("first_b"))

    def after_prompt(side: tuple[pl.Expr, pl.Expr]) -> pl.Expr:
        return side[0].list.slice(side[1] + 1)

    chosen = _pick(after_prompt(own), after_prompt(other))
    rejected = _pick(after_prompt(other), after_prompt(own))
    prompt = _pick(own[0].list.head(own[1] + 1), other[0].list.head(other[1] + 1))
    return prompt, chosen, rejected


def pair_rows(frame: pl.DataFrame, battles: pl.DataFrame, dump_revision: str) -> pl.DataFrame:
    """The chosen/rejected pairs for reward-model training of one batch of votes, one row per decisive vote.

    The one definition and producer of arena.preference_pairs: the loader calls it on each batch
    while it holds the nested conversations (``core.ingest.load.load_dump``), so the texts are
    assembled by list operations on rows already in memory, once, and the pairs cost no second
    pass over arena.messages and no more memory than a batch.

    A vote judges the two whole conversations, so a battle is never split into turns. Both sides
    start from the same first user message but, from the second turn on, each side has its own
    earlier replies, so only the first user message is a prompt shared by both; the rest of each
    side's conversation is its response:

    - ``prompt``: the chosen side's messages up to its first user message, rendered as text;
    - ``chosen`` / ``rejected``: every later message of the winning / losing side: for a one-turn
      battle the reply alone; for a multi-turn battle the first reply, then the next user
      message, the next reply, and so on.

    Text rendering: each message as ``"User: <text>"`` / ``"Assistant: <text>"`` (other roles
    title-cased word by word, a null role ``Unknown``; a message's text parts joined as in
    arena.messages, a message of images only has an empty text), messages joined by a blank line,
    so ``prompt + "\\n\\n" + chosen`` is the chosen side's whole transcript. Ties and ``both_bad``
    votes are left out, and so is a vote without a user message or a later message on either
    side; self-battles (one model on both sides) are kept. ``has_images``: a message of either
    side has an image part. ``categories``: the battle's categories in board order, from
    ``core.dataset.categories.tag_categories``, the rules arena.battle_categories is made with
    (row by row: a vote's categories do not depend on the batch it is in).

    Parameters
    ----------
    frame
        Nested rows (the dataset card's schema): ``id``, ``conversation_a``, ``conversation_b``.
    battles
        The same votes flattened and screened (``id``, ``winner``, ``model_a_canonical``,
        ``model_b_canonical``, ``turns``, ``language``, ``timestamp`` and the category rules'
        columns); ids unique. Only votes in both frames are paired.
    dump_revision
        Written in ``dump_revision``.

    Returns
    -------
    pl.DataFrame
        :data:`PAIR_ROWS_SCHEMA`, in ``battles`` order.
    """
    decided = battles.filter(pl.col("winner").is_in(["model_a", "model_b"]))
    if decided.is_empty():
        return pl.DataFrame(schema=PAIR_ROWS_SCHEMA)
    # every vote's sides are rendered and the decided ones joined: filtering the nested rows first (a gather
    # of every nested column) cost more than rendering the others (~0.2 of 0.47 CPU-s per 4 batches)
    prompt, chosen, rejected = _texts()
    pairs = (
        decided.join(_sides(frame.select("id", "conversation_a", "conversation_b")), on="id", how="inner",
                     maintain_order="left")
        .filter(pl.col("user_a") & pl.col("user_b") & (chosen.list.len() > 0) & (rejected.list.len() > 0))
        .join(_categories(decided), left_on="id", right_on="battle_id", how="left", maintain_order="left")
    )
    return pairs.select(
        pl.col("id").alias("battle_id"),
        prompt.list.join(MESSAGE_SEPARATOR).alias("prompt"),
        chosen.list.join(MESSAGE_SEPARATOR).alias("chosen"),
        rejected.list.join(MESSAGE_SEPARATOR).alias("rejected"),
        _pick(pl.col("model_a_canonical"), pl.col("model_b_canonical")).alias("chosen_model"),
        _pick(pl.col("model_b_canonical"), pl.col("model_a_canonical")).alias("rejected_model"),
        _pick(pl.lit("a"), pl.lit("b")).alias("chosen_side"),
        pl.col("turns").cast(pl.Int32),
        pl.col("language"),
        pl.col("timestamp").cast(pl.Datetime("us")),
        pl.col("categories").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col("images").alias("has_images"),
        pl.lit(dump_revision, dtype=pl.String).alias("dump_revision"),
    ).select([pl.col(c).cast(t) for c, t in PAIR_ROWS_SCHEMA.items()])
