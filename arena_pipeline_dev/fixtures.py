"""Fixture dumps with the dataset card's exact Arrow schema: multi-turn, empty-ish and non-English rows."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from pathlib import Path
from typing import NamedTuple

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.schema import CRITERIA, DATASET_ARROW_SCHEMA
from arena_pipeline.core.ingest.flatten import flatten_battles, flatten_context_messages, flatten_messages

MODELS = (
    "gemini-2.5-pro",
    "claude-3-7-sonnet-20250219-thinking-32k",
    "gpt-4.1-2025-04-14",
    "deepseek-v3-0324",
    "qwen3-235b-a22b",
    "llama-4-maverick",
)

PROMPTS = (
    "Compare Tormenta20 with DnD5e",
    "Écris un poème sur la mer en alexandrins.",
    "Napisz funkcję w Pythonie, która odwraca listę.",
    "Wie viele Primzahlen gibt es unter 100?",
    "日本の首都はどこですか？",
    "Solve 3x + 7 = 22 and explain each step.",
    " ",
    "",
    "Объясни, как работает TCP handshake.",
)


def _content(text: str, image: str | None = None) -> list[dict]:
    parts = [{"type": "text", "text": text, "image": None, "mimeType": None}]
    if image is not None:
        parts.append({"type": "image", "text": None, "image": image, "mimeType": "image/png"})
    return parts


def _answer(rng: random.Random, model: str, prompt: str) -> str:
    style = rng.random()
    body = f"Answer from {model} to: {prompt}"
    if style < 0.3:
        return f"# Title\n\n**Bold** point\n\n- item one\n- item two\n\n{body}"
    if style < 0.35:
        return ""
    return body * rng.randint(1, 3)


def make_row(rng: random.Random, index: int, *, turns: int | None = None,
             evaluation_order: int | None = None) -> dict:
    """One vote as the dataset card describes it (nested structs included)."""
    model_a, model_b = rng.sample(MODELS, 2)
    turns = turns if turns is not None else (1 if rng.random() < 0.75 else rng.randint(2, 3))
    order = evaluation_order if evaluation_order is not None else rng.randint(1, 3)
    context_turns = order - 1
    conv_a: list[dict] = []
    conv_b: list[dict] = []
    current: list[dict] = []
    user_tokens = 0
    tokens = {"a": 0, "b": 0}
    for t in range(turns):
        prompt = PROMPTS[(index + t) % len(PROMPTS)]
        image = f"https://img.example/{index}-{t}.png" if (index + t) % 11 == 5 else None
        user = {"role": "user", "content": _content(prompt, image)}
        ans_a = {"role": "assistant", "content": _content(_answer(rng, model_a, prompt))}
        ans_b = {"role": "assistant", "content": _content(_answer(rng, model_b, prompt))}
        n_user = max(1, len(prompt) // 4)
        user_tokens += n_user
        tokens["a"] += len(ans_a["content"][0]["text"]) // 4
        tokens["b"] += len(ans_b["content"][0]["text"]) // 4
        conv_a += [user, ans_a]
        conv_b += [dict(user, num_tokens=n_user), dict(ans_b, num_tokens=len(ans_b["content"][0]["text"]) // 4)]
        current.append({"user": user, "model_side_a": ans_a, "model_side_b": ans_b})
    context = []
    for c in range(context_turns):
        user = {"role": "user", "content": _content(f"Earlier question {c} of session {index}")}
        reply = {"role": "assistant", "content": _content(f"Earlier answer {c} by another model")}
        context.append({"user": user, "model_side_a": reply, "model_side_b": reply})

    def side_meta(side: str) -> dict:
        text = " ".join(m["content"][0]["text"] or "" for m in (conv_a if side == "a" else conv_b)
                        if m["role"] == "assistant")
        return {
            f"sum_assistant_{side}_tokens": tokens[side],
            f"header_count_{side}": {f"h{i}": (text.count("# ") if i == 1 else 0) for i in range(1, 7)},
            f"list_count_{side}": {"ordered": 0, "unordered": text.count("- item")},
            f"bold_count_{side}": {"**": text.count("**") // 2, "__": 0},
            f"context_{side}_tokens": user_tokens + 3 * context_turns,
        }

    criteria = {c: rng.random() < 0.6 for c in CRITERIA}
    cw = rng.random() < 0.2
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "model_a": model_a,
        "model_b": model_b,
        "winner": rng.choice(("model_a", "model_a", "model_b", "model_b", "tie", "both_bad")),
        "evaluation_session_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "evaluation_order": order,
        "conversation_a": conv_a,
        "conversation_b": conv_b,
        "full_conversation": context + current,
        "conv_metadata": {**side_meta("a"), **side_meta("b"),
                          "sum_user_tokens": user_tokens, "turns": turns},
        "category_tag": {
            "creative_writing_v0.1": {"creative_writing": cw, "score": "yes" if cw else "no"},
            "criteria_v0.1": criteria,
            "if_v0.1": {"if": rng.random() < 0.3, "score": rng.randint(0, 5)},
            "math_v0.1": {"math": rng.random() < 0.15},
        },
        "language": ("en", "fr", "pl", "de", "ja", "ru")[index % 6],
        "is_code": rng.random() < 0.2,
        "timestamp": dt.datetime(2025, 5, 1) + dt.timedelta(minutes=37 * index),
    }


def make_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` votes; row 0 is a 3-turn battle at evaluation order 2, row 1 has empty texts."""
    rng = random.Random(seed)
    rows = [make_row(rng, i) for i in range(n)]
    if n > 0:
        rows[0] = make_row(rng, 0, turns=3, evaluation_order=2)
    if n > 1:
        rows[1] = make_row(rng, 7, turns=1, evaluation_order=1)  # PROMPTS[7] is ''
    return rows


def make_table(n: int, seed: int = 0) -> pa.Table:
    """A table of ``n`` fixture votes with DATASET_ARROW_SCHEMA."""
    return pa.Table.from_pylist(make_rows(n, seed), schema=DATASET_ARROW_SCHEMA)


def write_dump(root: Path, n_rows: int = 40, n_shards: int = 2, seed: int = 0) -> list[Path]:
    """Write ``root/data/train-0000i-of-0000n.parquet`` like the Hub's layout; return the paths."""
    table = make_table(n_rows, seed)
    data = Path(root) / "data"
    data.mkdir(parents=True, exist_ok=True)
    paths = []
    per = -(-n_rows // n_shards)
    for i in range(n_shards):
        path = data / f"train-{i:05d}-of-{n_shards:05d}.parquet"
        pq.write_table(table.slice(i * per, per), path)
        paths.append(path)
    return paths


class FlatShard(NamedTuple):
    """The three flat tables made from one shard of the dump."""

    battles: pl.DataFrame
    messages: pl.DataFrame
    context_messages: pl.DataFrame


def flatten_table(table: pa.Table | pl.DataFrame, source_file: str, row_offset: int = 0,
                  aliases: pl.DataFrame | None = None) -> FlatShard:
    """One shard (Arrow table or Polars frame with the dataset card's schema) flattened whole, as the
    loader flattens each of its batches."""
    frame = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
    return FlatShard(battles=flatten_battles(frame, source_file, row_offset, aliases),
                     messages=flatten_messages(frame), context_messages=flatten_context_messages(frame))
