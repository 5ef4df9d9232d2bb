"""Fixture dumps of every public Arena format, built from each dataset card's documented schema.

Run as a script to write them (``python -m arena_pipeline_dev.dump_fixtures OUT_DIR``); tests
call :func:`write_family` or the ``make_*`` functions. A few dozen rows per dump:

- ``lmsys/chatbot_arena_conversations`` (33k, 2023): :data:`SCHEMA_33K`, ``tie (bothbad)`` winners,
  older model spellings (``gpt-4``, ``claude-v1``) that the alias table maps;
- ``lmarena-ai/arena-human-preference-55k`` (Kaggle ``train.csv``): JSON-string lists, one-hot winners;
- ``lmarena-ai/arena-human-preference-100k``: :data:`SCHEMA_100K`;
- ``lmarena-ai/arena-human-preference-140k``: ``fixtures.make_table`` (the card's exact schema).

Rows 9, 19, 29... of the 33k and 100k dumps are not anonymous (quarantined as ``not_anonymous``).
Overlaps on purpose (what the combined load must keep once and count): the 100k dump repeats
:data:`SHARED_ID_ROWS` votes of the 33k dump (same question id and content), and the 55k dump repeats
:data:`SHARED_CONTENT_ROWS` votes of the 100k dump by content (same models, winner and prompt).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.schema import CRITERIA
from arena_pipeline_dev.fixtures import make_table

DUMP_33K = "lmsys/chatbot_arena_conversations"
DUMP_55K = "lmarena-ai/arena-human-preference-55k"
DUMP_100K = "lmarena-ai/arena-human-preference-100k"
DUMP_140K = "lmarena-ai/arena-human-preference-140k"
ROWS = {DUMP_33K: 36, DUMP_55K: 30, DUMP_100K: 40, DUMP_140K: 40}
SHARED_ID_ROWS = 3
SHARED_CONTENT_ROWS = 4
#: rows cast with the model names shown (``anony`` false): rows 9, 19, 29... of the 33k and 100k
NOT_ANONYMOUS_EVERY = 10
NOT_ANONYMOUS = {DUMP_33K: 3, DUMP_100K: 4}

MODELS_2023 = ("gpt-4", "claude-v1", "vicuna-13b", "koala-13b", "gpt-3.5-turbo", "palm-2")
MODELS_2024 = ("gpt-4-0314", "claude-1", "vicuna-13b", "gpt-4o-2024-05-13", "llama-3-70b-instruct",
               "gemini-1.5-pro-api-0409-preview")
LANGUAGES = ("English", "English", "Chinese", "German", "Spanish", "unknown")
PROMPTS = ("What is the capital of France?", "Write a haiku about rain.", "Explain TCP in two lines.",
           "Sort [3,1,2] in Python.", "Wer war Goethe?", "解释一下量子纠缠。", "¿Qué hora es en Tokio?")

_MESSAGE = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))
_MODERATION_NAMES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "self-harm",
                     "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
                     "violence/graphic")

#: lmsys/chatbot_arena_conversations' dataset card (dataset_info.features), in its order.
SCHEMA_33K = pa.schema([
    ("question_id", pa.string()), ("model_a", pa.string()), ("model_b", pa.string()),
    ("winner", pa.string()), ("judge", pa.string()), ("conversation_a", _MESSAGE),
    ("conversation_b", _MESSAGE), ("turn", pa.int64()), ("anony", pa.bool_()),
    ("language", pa.string()), ("tstamp", pa.float64()),
    ("openai_moderation", pa.struct([
        ("categories", pa.struct([(n, pa.bool_()) for n in _MODERATION_NAMES])),
        ("category_scores", pa.struct([(n, pa.float64()) for n in _MODERATION_NAMES])),
        ("flagged", pa.bool_()),
    ])),
    ("toxic_chat_tag", pa.struct([
        ("roberta-large", pa.struct([("flagged", pa.bool_()), ("probability", pa.float64())])),
        ("t5-large", pa.struct([("flagged", pa.bool_()), ("score", pa.float64())])),
    ])),
])

_COUNTS = [("h1", pa.int64()), ("h2", pa.int64()), ("h3", pa.int64()), ("h4", pa.int64()),
           ("h5", pa.int64()), ("h6", pa.int64())]


def _side(side: str) -> list[tuple[str, pa.DataType]]:
    return [(f"sum_assistant_{side}_tokens", pa.int64()), (f"header_count_{side}", pa.struct(_COUNTS)),
            (f"list_count_{side}", pa.struct([("ordered", pa.int64()), ("unordered", pa.int64())])),
            (f"bold_count_{side}", pa.struct([("**", pa.int64()), ("__", pa.int64())])),
            (f"context_{side}_tokens", pa.int64())]


#: lmarena-ai/arena-human-preference-100k's columns (the issue's list; conv_metadata and category_tag
#: as the same team's PPE-Human-Preference-V1 card and the 140k card spell them; int64 counts).
SCHEMA_100K = pa.schema([
    ("question_id", pa.string()), ("model_a", pa.string()), ("model_b", pa.string()),
    ("winner", pa.string()), ("judge_hash", pa.string()), ("conversation_a", _MESSAGE),
    ("conversation_b", _MESSAGE), ("turn", pa.int64()), ("anony", pa.bool_()),
    ("language", pa.string()), ("tstamp", pa.float64()),
    ("conv_metadata", pa.struct(_side("a") + _side("b") + [("sum_user_tokens", pa.int64()),
                                                           ("turns", pa.int64())])),
    ("is_code", pa.bool_()), ("is_refusal", pa.bool_()),
    ("dedup_tag", pa.struct([("high_freq", pa.bool_()), ("sampled", pa.bool_())])),
    ("category_tag", pa.struct([
        ("criteria_v0.1", pa.struct([(c, pa.bool_()) for c in CRITERIA])),
        ("if_v0.1", pa.struct([("if", pa.bool_()), ("score", pa.int64())])),
        ("math_v0.1", pa.struct([("math", pa.bool_())])),
    ])),
])

#: The Kaggle train.csv header of lmarena-ai/arena-human-preference-55k.
COLUMNS_55K = ("id", "model_a", "model_b", "prompt", "response_a", "response_b",
               "winner_model_a", "winner_model_b", "winner_tie")


def _conversation(prompts: list[str], model: str) -> list[dict]:
    out = []
    for p in prompts:
        out += [{"role": "user", "content": p}, {"role": "assistant", "content": f"{model} answers: {p}"}]
    return out


def _vote(rng: random.Random, models: tuple[str, ...], index: int, winners: tuple[str, ...]) -> dict:
    model_a, model_b = rng.sample(models, 2)
    turns = 1 if rng.random() < 0.8 else 2
    prompts = [PROMPTS[(index + t) % len(PROMPTS)] + f" (#{index})" for t in range(turns)]
    return {"question_id": uuid.UUID(int=rng.getrandbits(128)).hex, "model_a": model_a, "model_b": model_b,
            "winner": rng.choice(winners), "prompts": prompts, "turn": turns,
            "conversation_a": _conversation(prompts, model_a), "conversation_b": _conversation(prompts, model_b),
            "anony": index % NOT_ANONYMOUS_EVERY != NOT_ANONYMOUS_EVERY - 1,
            "language": LANGUAGES[index % len(LANGUAGES)]}


def make_33k(n: int = ROWS[DUMP_33K], seed: int = 33) -> pa.Table:
    """``n`` votes of lmsys/chatbot_arena_conversations (April-June 2023)."""
    rng = random.Random(seed)
    start = dt.datetime(2023, 4, 24, tzinfo=dt.UTC).timestamp()
    rows = []
    for i in range(n):
        vote = _vote(rng, MODELS_2023, i, ("model_a", "model_b", "tie", "tie (bothbad)"))
        flags = {name: False for name in _MODERATION_NAMES}
        rows.append({
            **{k: vote[k] for k in ("question_id", "model_a", "model_b", "winner", "conversation_a",
                                    "conversation_b", "turn", "anony", "language")},
            "judge": f"arena_user_{rng.randint(1, 400)}",
            "tstamp": start + i * 86_400 * 1.6 + rng.random(),
            "openai_moderation": {"categories": flags, "category_scores": {k: 0.001 for k in flags},
                                  "flagged": False},
            "toxic_chat_tag": {"roberta-large": {"flagged": False, "probability": 0.01},
                               "t5-large": {"flagged": False, "score": 0.02}},
        })
    return pa.Table.from_pylist(rows, schema=SCHEMA_33K)


def _meta(vote: dict, rng: random.Random) -> dict:
    meta = {}
    for side in ("a", "b"):
        meta.update({
            f"sum_assistant_{side}_tokens": rng.randint(5, 400),
            f"header_count_{side}": {f"h{i}": rng.randint(0, 2) if i < 3 else 0 for i in range(1, 7)},
            f"list_count_{side}": {"ordered": rng.randint(0, 3), "unordered": rng.randint(0, 3)},
            f"bold_count_{side}": {"**": rng.randint(0, 4), "__": 0},
            f"context_{side}_tokens": rng.randint(5, 50),
        })
    return {**meta, "sum_user_tokens": rng.choice((12, 40, 700)), "turns": vote["turn"]}


def make_100k(n: int = ROWS[DUMP_100K], seed: int = 100, shared: pa.Table | None = None) -> pa.Table:
    """``n`` votes of arena-human-preference-100k (2024); the first :data:`SHARED_ID_ROWS` repeat the
    first votes of ``shared`` (a 33k table): the same question id, models, winner and conversations."""
    rng = random.Random(seed)
    start = dt.datetime(2024, 5, 2, tzinfo=dt.UTC).timestamp()
    repeated = shared.slice(0, SHARED_ID_ROWS).to_pylist() if shared is not None else []
    rows = []
    for i in range(n):
        vote = _vote(rng, MODELS_2024, i, ("model_a", "model_b", "tie", "tie (bothbad)"))
        if i < len(repeated):
            vote.update({k: repeated[i][k] for k in ("question_id", "model_a", "model_b", "winner", "turn",
                                                     "conversation_a", "conversation_b")})
        rows.append({
            **{k: vote[k] for k in ("question_id", "model_a", "model_b", "winner", "conversation_a",
                                    "conversation_b", "turn", "anony", "language")},
            "judge_hash": uuid.UUID(int=rng.getrandbits(128)).hex[:16],
            "tstamp": start + i * 86_400 * 1.5,
            "conv_metadata": _meta(vote, rng),
            "is_code": rng.random() < 0.25,
            "is_refusal": rng.random() < 0.05,
            "dedup_tag": {"high_freq": False, "sampled": True},
            "category_tag": {"criteria_v0.1": {c: rng.random() < 0.6 for c in CRITERIA},
                             "if_v0.1": {"if": rng.random() < 0.3, "score": rng.randint(0, 5)},
                             "math_v0.1": {"math": rng.random() < 0.2}},
        })
    return pa.Table.from_pylist(rows, schema=SCHEMA_100K)


def make_55k_csv(n: int = ROWS[DUMP_55K], seed: int = 55, shared: pa.Table | None = None) -> bytes:
    """The Kaggle train.csv of arena-human-preference-55k; its first rows repeat votes of ``shared``
    (a 100k table) by content: same models, winner and prompt text (ties only where not both-bad)."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS_55K)
    repeated = []
    if shared is not None:
        repeated = [r for r in shared.to_pylist() if r["winner"] != "tie (bothbad)"][:SHARED_CONTENT_ROWS]
    for i in range(n):
        if i < len(repeated):
            row = repeated[i]
            model_a, model_b, winner = row["model_a"], row["model_b"], row["winner"]
            prompts = [m["content"] for m in row["conversation_a"] if m["role"] == "user"]
        else:
            vote = _vote(rng, MODELS_2024, 1000 + i, ("model_a", "model_b", "tie"))
            model_a, model_b, winner, prompts = vote["model_a"], vote["model_b"], vote["winner"], vote["prompts"]
        responses_a = [f"{model_a} answers: {p}" for p in prompts]
        responses_b = [f"{model_b} answers: {p}" for p in prompts]
        if i == len(repeated):
            responses_b[-1] = None  # the Kaggle file has null responses ('[null]')
        writer.writerow([
            30_000 + i * 7, model_a, model_b, json.dumps(prompts), json.dumps(responses_a),
            json.dumps(responses_b), int(winner == "model_a"), int(winner == "model_b"), int(winner == "tie"),
        ])
    return out.getvalue().encode()


def family_files(seed: int = 0) -> dict[str, dict[str, bytes]]:
    """Each fixture dump's files as the Hub lays them out (repo path -> bytes), by dataset id."""
    t33 = make_33k()
    t100 = make_100k(shared=t33)
    t140 = make_table(ROWS[DUMP_140K], seed)

    def parquet(table: pa.Table) -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return sink.getvalue()

    return {
        DUMP_33K: {"data/train-00000-of-00001.parquet": parquet(t33)},
        DUMP_55K: {"train.csv": make_55k_csv(shared=t100)},
        DUMP_100K: {"data/train-00000-of-00001.parquet": parquet(t100)},
        DUMP_140K: {"data/train-00000-of-00001.parquet": parquet(t140)},
    }


def write_family(root: Path, seed: int = 0) -> dict[str, Path]:
    """Write every fixture dump under ``root/<org>/<name>/``; return dataset id -> its folder."""
    folders = {}
    for dataset, files in family_files(seed).items():
        folder = Path(root) / dataset
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        folders[dataset] = folder
    return folders


if __name__ == "__main__":
    for name, folder in write_family(Path(sys.argv[1] if len(sys.argv) > 1 else "dump_fixtures")).items():
        print(name, folder)
