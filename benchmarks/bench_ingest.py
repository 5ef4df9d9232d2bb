"""Wall time and peak RSS of raw dump -> the flat tables and preference pairs (``load_dump``) against a floor.

Run::

    .venv/bin/python benchmarks/bench_ingest.py                # full size: 135,634 rows
    .venv/bin/python benchmarks/bench_ingest.py --rows 20000   # quick run

The dump is SYNTHETIC, with the dataset card's exact Arrow schema (DATASET_ARROW_SCHEMA) and the
real dump's volume: a few thousand template votes are generated in Python (75% one-turn, the rest
2-3 turns; sessions of 1-3 votes, so evaluation orders 1-3 with the earlier votes' turns at the
head of ``full_conversation``; markdown answers of a few KB, lognormal lengths; ~30% of votes in
French, German, Polish, Russian, Japanese or Chinese), then tiled with pyarrow to ``--rows`` rows
with fresh unique ids, ~22 KB of Arrow data per row (~3 GB at full size). It is written as
``data/train-0000i-of-0000N.parquet`` (snappy; 1,000-row row groups, the batch size of
``datasets``' ``to_parquet`` for text-only features) and cached under ``--workdir`` so re-runs
skip generation.

Each phase runs in its own subprocess, so its peak RSS (``ru_maxrss`` from ``os.wait4``) is its own:

- ``floor``: pyarrow reads each shard and DuckDB inserts the Arrow table as-is (nested, unflattened)
  into a fresh DuckDB file, all in one transaction; the floor any loader that reads with pyarrow
  pays.
- ``floor_sql``: ``CREATE TABLE raw AS SELECT * FROM read_parquet([...])`` (DuckDB's own reader),
  for reference.
- ``load_dump``: ``arena_pipeline.core.ingest.load.load_dump`` into a fresh DuckDB file (the flat tables
  and the preference pairs, as the pipeline loads them).

Wall seconds are measured inside the subprocess (imports excluded, closing the database
included); CPU seconds (user + system, from ``os.wait4``) are the whole subprocess's and vary less
than wall time when other work shares the machine. The load average is printed for that reason.
The target compares ``load_dump`` with the faster of the two floors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.schema import CRITERIA, DATASET_ARROW_SCHEMA, WINNERS

FULL_ROWS = 135_634
GENERATOR_VERSION = 2  # bump when the generator changes, so cached dumps are rebuilt
ROW_GROUP_ROWS = 1_000  # datasets' DEFAULT_MAX_BATCH_SIZE: the row groups of the Hub's parquet
MB = 1024 * 1024

MODELS = (
    "gemini-2.5-pro", "claude-3-7-sonnet-20250219-thinking-32k", "gpt-4.1-2025-04-14",
    "deepseek-v3-0324", "qwen3-235b-a22b", "llama-4-maverick-17b-128e-instruct", "o3-2025-04-16",
    "grok-3-preview-02-24", "mistral-medium-2505", "gemma-3-27b-it", "chatgpt-4o-latest-20250326",
    "claude-opus-4-20250514", "amazon-nova-experimental-chat-05-14", "minimax-m1",
)

# (language, weight, syllables): pseudo-words from each language's syllables give text whose
# byte length, character set and compressibility are close to real prose.
LANGUAGES = (
    ("en", 70, "the an ing er on re in ed st ar al or en at es it ion ter pro com con ex per sy da"
               " ma ke ly ment ness able ful"),
    ("fr", 5, "le la de re qu ou é è ai en on tion ment eau ch es ez ê par pour dé"),
    ("de", 5, "sch ei en er ch ung ge be ver ü ö ä ß ie au st lich keit der die das"),
    ("pl", 5, "prz ch cz sz rz ż ą ę ó ł ś ć ni wy po za na ow ski ość"),
    ("ru", 6, "пр ст но ен ов ни ра ко то на ль ый ая ие ть по за ре ми ск ва"),
    ("ja", 4, "の は に を た が で て と し れ さ ある いる する こと 日本 時間 問題 方法 説明 場合"),
    ("zh", 5, "的 是 在 了 不 和 有 大 这 中 人 上 为 们 地 个 用 工 时 要 动 国 产 以 我 到 他 会"),
)
CJK = {"ja", "zh"}


class TextMaker:
    """Seeded pseudo-prose from Zipf-distributed (exponent 0.9) per-language vocabularies.

    Half the words are made of the language's syllables, half of its letters; with this mix the
    text compresses like the real dump's under snappy (parquet about 0.53 of the Arrow bytes).
    """

    def __init__(self, rng: random.Random, vocabulary: int = 20_000, zipf: float = 0.9):
        self.rng = rng
        self.words: dict[str, list[str]] = {}
        self.cum: dict[str, list[float]] = {}
        for lang, _, syllables in LANGUAGES:
            parts = syllables.split()
            letters = sorted(set("".join(parts)))
            unique: set[str] = set()
            while len(unique) < vocabulary:
                if rng.random() < 0.5:
                    unique.add("".join(rng.choices(parts, k=rng.randint(1, 4))))
                else:
                    unique.add("".join(rng.choices(letters, k=rng.randint(1, 9))))
            words = sorted(unique)
            rng.shuffle(words)
            total, cum = 0.0, []
            for rank in range(len(words)):
                total += 1.0 / (rank + 1) ** zipf
                cum.append(total)
            self.words[lang], self.cum[lang] = words, cum

    def sentence(self, lang: str, n_words: int) -> str:
        words = self.rng.choices(self.words[lang], cum_weights=self.cum[lang], k=max(1, n_words))
        if lang in CJK:
            return "".join(words) + "。"
        text = " ".join(words)
        return text[0].upper() + text[1:] + self.rng.choice(".....?!:")

    def paragraph(self, lang: str, n_chars: int) -> str:
        sentences, size = [], 0
        while size < n_chars:
            s = self.sentence(lang, self.rng.randint(5, 22))
            sentences.append(s)
            size += len(s) + 1
        return " ".join(sentences)

    def prompt(self, lang: str, n_chars: int) -> str:
        return self.paragraph(lang, n_chars)[: max(n_chars, 1)]

    def answer(self, lang: str, n_chars: int, code: bool) -> str:
        """Markdown of about ``n_chars``: headers, bold terms, bullet and numbered lists, code."""
        rng, blocks, size = self.rng, [], 0
        while size < n_chars:
            kind = rng.random()
            if kind < 0.12:
                level = rng.choice((1, 2, 2, 3, 3, 3))
                block = "#" * level + " " + self.sentence(lang, rng.randint(2, 6))
            elif kind < 0.30:
                marker = "-" if rng.random() < 0.6 else None
                items = [
                    f"{marker or f'{i + 1}.'} **{self.sentence(lang, 2)[:-1]}**: "
                    + self.sentence(lang, rng.randint(4, 14))
                    for i in range(rng.randint(2, 6))
                ]
                block = "\n".join(items)
            elif kind < 0.38 and code:
                calls = (self.sentence("en", rng.randint(2, 6))[:-1].lower().replace(" ", "_")
                         for _ in range(rng.randint(3, 15)))
                lines = [f"    {call}({rng.randint(0, 99)})" for call in calls]
                block = "```python\ndef main():\n" + "\n".join(lines) + "\n```"
            else:
                block = self.paragraph(lang, rng.randint(150, 700))
            blocks.append(block)
            size += len(block) + 2
        return "\n\n".join(blocks)


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, median * math.exp(rng.gauss(0.0, sigma)))))


def _content(text: str, image: str | None = None) -> list[dict]:
    parts = [{"type": "text", "text": text, "image": None, "mimeType": None}]
    if image is not None:
        parts.append({"type": "image", "text": None, "image": image, "mimeType": "image/png"})
    return parts


def _style(texts: list[str], side: str, tokens: int, context_tokens: int) -> dict:
    lines = [line for text in texts for line in text.splitlines()]
    joined = "\n".join(texts)
    return {
        f"sum_assistant_{side}_tokens": tokens,
        f"header_count_{side}": {f"h{i}": sum(line.startswith("#" * i + " ") for line in lines)
                                 for i in range(1, 7)},
        f"list_count_{side}": {
            "ordered": sum(line[:1].isdigit() and ". " in line[:4] for line in lines),
            "unordered": sum(line.startswith("- ") for line in lines),
        },
        f"bold_count_{side}": {"**": joined.count("**") // 2, "__": joined.count("__") // 2},
        f"context_{side}_tokens": context_tokens,
    }


def _tokens(text: str) -> int:
    return max(1, len(text.encode()) // 4)


def template_rows(n: int, seed: int) -> list[dict]:
    """``n`` votes in sessions of 1-3 evaluation orders (Python dicts, dataset card layout)."""
    rng = random.Random(seed)
    maker = TextMaker(rng)
    langs = [lang for lang, _, _ in LANGUAGES]
    weights = [w for _, w, _ in LANGUAGES]
    start = datetime(2025, 4, 17)
    rows: list[dict] = []
    while len(rows) < n:
        session = str(uuid.UUID(int=rng.getrandbits(128)))
        lang = rng.choices(langs, weights)[0]
        code = rng.random() < 0.3
        history: list[dict] = []  # full_conversation entries of the session so far
        for order in range(1, rng.choices((1, 2, 3), (60, 25, 15))[0] + 1):
            if len(rows) == n:
                break
            model_a, model_b = rng.sample(MODELS, 2)
            turns = 1 if rng.random() < 0.75 else rng.randint(2, 3)
            conv_a, conv_b, own = [], [], []
            user_tokens, tok_a, tok_b, texts_a, texts_b = 0, 0, 0, [], []
            for t in range(turns):
                prompt = maker.prompt(lang, _lognormal(rng, 90, 1.3, 1, 8_000))
                image = (f"https://img.example/{session}-{order}-{t}.png"
                         if rng.random() < 0.01 else None)
                text_a = maker.answer(lang, _lognormal(rng, 1_650, 0.75, 20, 30_000), code)
                text_b = maker.answer(lang, _lognormal(rng, 1_650, 0.75, 20, 30_000), code)
                user = {"role": "user", "content": _content(prompt, image)}
                ans_a = {"role": "assistant", "content": _content(text_a)}
                ans_b = {"role": "assistant", "content": _content(text_b)}
                n_user = _tokens(prompt)
                user_tokens += n_user
                tok_a, tok_b = tok_a + _tokens(text_a), tok_b + _tokens(text_b)
                texts_a.append(text_a)
                texts_b.append(text_b)
                conv_a += [user, ans_a]
                conv_b += [dict(user, num_tokens=n_user), dict(ans_b, num_tokens=_tokens(text_b))]
                own.append({"user": user, "model_side_a": ans_a, "model_side_b": ans_b})
            context_tokens = user_tokens + sum(
                _tokens(e["user"]["content"][0]["text"]) for e in history)
            cw = rng.random() < 0.15
            rows.append({
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "model_a": model_a,
                "model_b": model_b,
                "winner": rng.choices(WINNERS, (36, 37, 16, 11))[0],
                "evaluation_session_id": session,
                "evaluation_order": order,
                "conversation_a": conv_a,
                "conversation_b": conv_b,
                "full_conversation": history + own,
                "conv_metadata": {**_style(texts_a, "a", tok_a, context_tokens),
                                  **_style(texts_b, "b", tok_b, context_tokens),
                                  "sum_user_tokens": user_tokens, "turns": turns},
                "category_tag": {
                    "creative_writing_v0.1": {"creative_writing": cw,
                                              "score": "yes" if cw else "no"},
                    "criteria_v0.1": {c: rng.random() < 0.5 for c in CRITERIA},
                    "if_v0.1": {"if": rng.random() < 0.3, "score": rng.randint(0, 5)},
                    "math_v0.1": {"math": rng.random() < 0.1},
                },
                "language": lang,
                "is_code": code,
                "timestamp": start + timedelta(seconds=rng.randint(0, 100 * 86_400)),
            })
            history = history + own
    return rows


def tiled(template: pa.Table, n_rows: int) -> pa.Table:
    """``template`` repeated to ``n_rows`` rows (zero-copy slices), with unique ids per copy.

    Copy ``k`` rewrites hex digits 24-27 of ``id`` and ``evaluation_session_id`` (UUID strings) to
    ``k``, so ids stay unique and UUID-shaped, and sessions stay sessions.
    """
    pieces = []
    for k in range(-(-n_rows // template.num_rows)):
        piece = template.slice(0, min(template.num_rows, n_rows - k * template.num_rows))
        for name in ("id", "evaluation_session_id"):
            column = pc.utf8_replace_slice(piece.column(name), start=24, stop=28,
                                           replacement=f"{k:04x}")
            piece = piece.set_column(piece.schema.get_field_index(name), name, column)
        pieces.append(piece)
    return pa.concat_tables(pieces)


def ensure_dump(workdir: Path, rows: int, shards: int, templates: int,
                seed: int) -> tuple[Path, dict]:
    """The cached dump for these parameters, generated first if absent; returns (root, meta)."""
    root = workdir / f"dump-r{rows}-s{shards}-t{templates}-seed{seed}-v{GENERATOR_VERSION}"
    meta_path = root / "meta.json"
    if meta_path.exists():
        return root, {**json.loads(meta_path.read_text()), "cached": True}
    started = time.perf_counter()
    template = pa.Table.from_pylist(template_rows(min(templates, rows), seed),
                                    schema=DATASET_ARROW_SCHEMA)
    table = tiled(template, rows)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    per = -(-rows // shards)
    for i in range(shards):
        pq.write_table(table.slice(i * per, per), data / f"train-{i:05d}-of-{shards:05d}.parquet",
                       row_group_size=ROW_GROUP_ROWS, compression="snappy")
    meta = {"rows": rows, "shards": shards, "templates": templates, "seed": seed,
            "template_arrow_bytes": template.nbytes,
            "generate_seconds": round(time.perf_counter() - started, 1)}
    meta_path.write_text(json.dumps(meta, indent=2))
    return root, {**meta, "cached": False}


# ---------------------------------------------------------------------------
# Phases (each run in its own subprocess by main)
# ---------------------------------------------------------------------------

def _shards(dump: Path) -> list[Path]:
    return sorted((dump / "data").glob("train-*.parquet"))


def phase_floor(dump: Path, db: Path) -> dict:
    """pyarrow reads each shard whole; DuckDB inserts the nested Arrow table as-is."""
    import duckdb

    started = time.perf_counter()
    read_s = insert_s = 0.0
    arrow_bytes = rows = 0
    con = duckdb.connect(str(db))
    con.execute("BEGIN TRANSACTION")
    for i, path in enumerate(_shards(dump)):
        t0 = time.perf_counter()
        shard = pq.read_table(path, columns=DATASET_ARROW_SCHEMA.names)
        t1 = time.perf_counter()
        arrow_bytes += shard.nbytes
        rows += shard.num_rows
        if i == 0:
            con.execute("CREATE TABLE raw AS SELECT * FROM shard")
        else:
            con.execute("INSERT INTO raw SELECT * FROM shard")
        insert_s += time.perf_counter() - t1
        read_s += t1 - t0
        del shard
    t0 = time.perf_counter()
    con.execute("COMMIT")
    con.close()
    close_s = time.perf_counter() - t0
    return {"seconds": time.perf_counter() - started, "rows": rows, "arrow_bytes": arrow_bytes,
            "detail": f"read {read_s:.1f} s, insert {insert_s:.1f} s, commit+close {close_s:.1f} s"}


def phase_floor_sql(dump: Path, db: Path) -> dict:
    """DuckDB's own parquet reader: CREATE TABLE raw AS SELECT * FROM read_parquet(...)."""
    import duckdb

    started = time.perf_counter()
    con = duckdb.connect(str(db))
    files = [str(p) for p in _shards(dump)]
    con.execute("CREATE TABLE raw AS SELECT * FROM read_parquet(?)", [files])
    rows = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    con.close()
    return {"seconds": time.perf_counter() - started, "rows": rows, "detail": ""}


def phase_load_dump(dump: Path, db: Path) -> dict:
    """The pipeline's ingest: ``load_dump`` of the dump's manifest into a fresh DuckDB file.

    The manifest (``local_manifest``: schema check and fingerprint of every shard, which the
    raw-dump asset does before ``load_dump`` runs) is built before the clock starts; its time is
    reported in the detail column.
    """
    from arena_pipeline.constants import SCHEMA
    from arena_pipeline.core.ingest.load import load_dump
    from arena_pipeline.core.ingest.local_dump import local_manifest
    from arena_pipeline.core.ingest.sources import SourceSpec
    from arena_pipeline.core.store import warehouse

    t0 = time.perf_counter()
    manifest = local_manifest(SourceSpec("parquet_dir", str(dump)))
    manifest_s = time.perf_counter() - t0
    started = time.perf_counter()
    con = warehouse.connect(str(db))
    report = load_dump(manifest, con, SCHEMA)
    t0 = time.perf_counter()
    con.close()
    close_s = time.perf_counter() - t0
    return {"seconds": time.perf_counter() - started, "rows": report.rows_read,
            "detail": f"battles {report.battles:,}, messages {report.messages:,}, "
                      f"context_messages {report.context_messages:,}, "
                      f"quarantined {report.quarantined:,}; "
                      f"close {close_s:.1f} s (manifest before: {manifest_s:.1f} s)"}


PHASES = {"floor": phase_floor, "floor_sql": phase_floor_sql, "load_dump": phase_load_dump}


def run_phase(name: str, dump: Path, scratch: Path) -> dict:
    """Run one phase in a fresh interpreter; add its peak RSS and the DuckDB file size."""
    db = scratch / f"{name}.duckdb"
    for stale in scratch.glob(f"{name}.duckdb*"):
        stale.unlink()
    out = scratch / f"{name}.json"
    proc = subprocess.Popen([sys.executable, __file__, "--phase", name, "--dump", str(dump),
                             "--db", str(db), "--out", str(out)])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"phase {name} failed with exit code {proc.returncode}")
    result = json.loads(out.read_text())
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # kilobytes on Linux
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    result["db_mb"] = db.stat().st_size / MB
    for leftover in scratch.glob(f"{name}.duckdb*"):
        leftover.unlink()
    return result


def add_dump_arguments(parser: argparse.ArgumentParser, rows: int = FULL_ROWS, shards: int = 8) -> None:
    """The synthetic dump's options, shared by the benchmarks that build on it."""
    parser.add_argument("--rows", type=int, default=rows, help=f"votes in the dump (default {rows:,})")
    parser.add_argument("--shards", type=int, default=shards, help=f"parquet shards (default {shards})")
    parser.add_argument("--templates", type=int, default=3_000, help="distinct generated votes")
    parser.add_argument("--seed", type=int, default=20250529)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "arena_bench",
                        help="where the dump is cached and the DuckDB files are written")


def dump_from_args(args: argparse.Namespace) -> tuple[Path, dict]:
    """The synthetic dump the options of ``add_dump_arguments`` describe (built once, then cached)."""
    return ensure_dump(args.workdir, args.rows, args.shards, args.templates, args.seed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--phases", default="floor,floor_sql,load_dump",
                        help="comma-separated subset of " + ",".join(PHASES))
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each phase (best is reported)")
    parser.add_argument("--phase", choices=list(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:  # child process
        args.out.write_text(json.dumps(PHASES[args.phase](args.dump, args.db)))
        return

    args.workdir.mkdir(parents=True, exist_ok=True)
    dump, meta = dump_from_args(args)
    files = _shards(dump)
    parquet_bytes = sum(p.stat().st_size for p in files)
    row_groups = sum(pq.ParquetFile(p).num_row_groups for p in files)
    print(f"dump      {dump}")
    print(f"          {meta['rows']:,} rows in {len(files)} shards, {row_groups} row groups, "
          f"parquet {parquet_bytes / MB:,.0f} MiB"
          + (f" (cached; generated in {meta['generate_seconds']} s)" if meta["cached"]
             else f" (generated now in {meta['generate_seconds']} s)"))
    print(f"machine   {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"pyarrow {pa.__version__}, duckdb {__import__('duckdb').__version__}, "
          f"polars {__import__('polars').__version__}")
    print(f"load avg  {os.getloadavg()[0]:.2f} at start")

    results: dict[str, dict] = {}
    names = [n for n in args.phases.split(",") if n]
    for _ in range(args.repeat):
        for name in names:
            r = run_phase(name, dump, args.workdir)
            print(f"  run {name:<10} {r['seconds']:7.1f} s wall {r['cpu_seconds']:7.1f} s CPU  "
                  f"peak RSS {r['peak_rss_mb']:7,.0f} MiB  (load avg {os.getloadavg()[0]:.2f})")
            best = results.setdefault(name, dict(r))
            if r["seconds"] < best["seconds"]:  # best wall time, lowest CPU, highest peak RSS
                best.update(r, cpu_seconds=best["cpu_seconds"], peak_rss_mb=best["peak_rss_mb"])
            best["cpu_seconds"] = min(best["cpu_seconds"], r["cpu_seconds"])
            best["peak_rss_mb"] = max(best["peak_rss_mb"], r["peak_rss_mb"])
    arrow_bytes = results.get("floor", {}).get("arrow_bytes")
    if arrow_bytes:
        print(f"arrow     {arrow_bytes / MB:,.0f} MiB in memory "
              f"({arrow_bytes / meta['rows']:,.0f} B/row, {arrow_bytes / 1e9:.2f} GB)")
    floors = [n for n in results if n.startswith("floor")]
    wall_floor = min((results[n]["seconds"] for n in floors), default=None)
    cpu_floor = min((results[n]["cpu_seconds"] for n in floors), default=None)
    print(f"\n{'phase':<10} {'rows':>9} {'wall s':>7} {'x floor':>7} {'CPU s':>7} {'x floor':>7} "
          f"{'peak RSS MiB':>12} {'DuckDB MiB':>10}  detail")
    for name, r in results.items():
        wall_x = f"{r['seconds'] / wall_floor:7.2f}" if wall_floor else f"{'-':>7}"
        cpu_x = f"{r['cpu_seconds'] / cpu_floor:7.2f}" if cpu_floor else f"{'-':>7}"
        print(f"{name:<10} {r['rows']:>9,} {r['seconds']:>7.1f} {wall_x} "
              f"{r['cpu_seconds']:>7.1f} {cpu_x} "
              f"{r['peak_rss_mb']:>12,.0f} {r['db_mb']:>10,.0f}  {r['detail']}")
    if wall_floor and "load_dump" in results:
        r = results["load_dump"]
        rss_gb = r["peak_rss_mb"] * MB / 1e9
        print(f"\ntarget    load_dump within 2x of the faster floor: "
              f"{'yes' if r['seconds'] <= 2 * wall_floor else 'NO'} "
              f"({r['seconds'] / wall_floor:.2f}x wall, {r['cpu_seconds'] / cpu_floor:.2f}x CPU)")
        print(f"          load_dump peak RSS under 6 GB: {'yes' if rss_gb < 6 else 'NO'} "
              f"({rss_gb:.2f} GB)")
    print(f"load avg  {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
