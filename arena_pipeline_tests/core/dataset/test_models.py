"""Model-name normalization, the alias table, canonical columns, merged names, arena.models."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core.dataset.models import (
    ALIASES_SCHEMA,
    MERGED_NAMES_SCHEMA,
    MODELS_SCHEMA,
    AliasTableError,
    add_canonical_columns,
    blank_characters,
    confusable_pairs,
    load_aliases,
    merged_names,
    model_facts_in_duckdb,
    models_table,
    normalize_name_expr,
    skeleton_expr,
)

REAL_CSV = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"


def normalize_names(names: Iterable[str | None]) -> list[str | None]:
    """:func:`normalize_name_expr` applied to a few names."""
    series = pl.Series("name", list(names), dtype=pl.String)
    return series.to_frame().select(normalize_name_expr("name")).to_series().to_list()


@pytest.fixture(scope="module")
def aliases() -> pl.DataFrame:
    return load_aliases()


# ---------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------

GOLDEN = [
    ("claude-opus-4-20250514", "claude-opus-4-20250514"),
    ("  Claude-Opus-4-20250514\t", "claude-opus-4-20250514"),
    ("Claude Opus 4 (20250514)", "claude-opus-4-20250514"),
    ("claude_opus_4_20250514", "claude-opus-4-20250514"),
    ("GPT 4o  mini", "gpt-4o-mini"),
    ("gpt-4o -- mini", "gpt-4o-mini"),
    ("Gemini–2.5—Pro", "gemini-2.5-pro"),  # en and em dashes
    ("ＧＰＴ-4.1", "gpt-4.1"),  # full-width letters (NFKC)
    ("[Gemini 2.5 Flash]", "gemini-2.5-flash"),
    ("amazon.nova-pro-v1:0", "amazon.nova-pro-v1:0"),  # dots and colons kept
    ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/llama-3.3-70b-instruct"),  # org kept
    ("claude-opus-4@20250514", "claude-opus-4@20250514"),
    ("", None),
    ("  _ - ", None),
    (None, None),
]


@pytest.mark.parametrize(("raw", "expected"), GOLDEN)
def test_normalization_golden_cases(raw: str | None, expected: str | None) -> None:
    assert normalize_names([raw]) == [expected]


@pytest.mark.parametrize(
    "different",
    [
        # a date suffix, a thinking budget, a preview tag or a variant is another model
        ("gpt-4.1", "gpt-4.1-2025-04-14"),
        ("claude-opus-4-20250514", "claude-opus-4-20250514-thinking-16k"),
        ("gemini-2.5-pro", "gemini-2.5-pro-preview-05-06", "gemini-2.5-pro-preview-03-25"),
        ("gemini-2.5-flash", "gemini-2.5-flash-preview-04-17"),
        ("qwen3-235b-a22b", "qwen3-235b-a22b-no-thinking", "qwen3-235b-a22b-instruct-2507"),
        ("grok-3-mini-beta", "grok-3-mini-high"),
        ("gpt-4.1", "gpt-4-1"),  # dots are not separators
    ],
)
def test_normalization_keeps_different_models_apart(different: tuple[str, ...]) -> None:
    normalized = normalize_names(different)
    assert len(set(normalized)) == len(different)


def test_normalization_is_idempotent(aliases: pl.DataFrame) -> None:
    names = aliases.get_column("alias").to_list() + [raw for raw, _ in GOLDEN if raw]
    once = normalize_names(names)
    assert normalize_names(once) == once


# ---------------------------------------------------------------------------
# the packaged alias table
# ---------------------------------------------------------------------------

# distinct names in arena-human-preference-140k, plus LMArena's names of three 2023 models the
# older dumps spell otherwise (gpt-4-0314, claude-1, claude-instant-1: issue 14)
REAL_MODELS = 53 + 3


def test_packaged_table_shape_and_providers(aliases: pl.DataFrame) -> None:
    assert aliases.schema == pl.Schema(ALIASES_SCHEMA)
    assert aliases.get_column("alias").is_unique().all()
    assert aliases.get_column("provider").null_count() == 0
    assert (aliases.get_column("source") == "package").all()
    canonical = aliases.get_column("canonical").unique()
    assert canonical.len() == REAL_MODELS
    # canonical names are normalized and never an alias of something else
    assert normalize_names(canonical.to_list()) == canonical.to_list()
    self_rows = aliases.filter(pl.col("alias") == pl.col("canonical"))
    assert self_rows.height == REAL_MODELS
    providers = dict(self_rows.select("canonical", "provider").iter_rows())
    assert providers["gemma-3-27b-it"] == "Google"
    assert providers["gemini-2.5-pro"] == "Google"
    assert providers["claude-3-7-sonnet-20250219-thinking-32k"] == "Anthropic"
    assert providers["o4-mini-2025-04-16"] == "OpenAI"
    assert providers["chatgpt-4o-latest-20250326"] == "OpenAI"
    assert providers["amazon.nova-pro-v1:0"] == "Amazon"
    assert providers["qwq-32b"] == "Alibaba"
    assert providers["grok-4-0709"] == "xAI"
    assert providers["command-a-03-2025"] == "Cohere"


def test_aliases_resolve_renamed_models(aliases: pl.DataFrame) -> None:
    raw = [
        "amazon-nova-pro-v1.0",
        "Claude 3.5 Sonnet (20241022)",
        "Claude Opus 4 (thinking-16k)",
        "anthropic.claude-opus-4-20250514-v1:0",
        "claude-sonnet-4@20250514",
        "o3",
        "meta-llama/Llama-3.3-70B-Instruct",
        "Gemini 2.5 Pro",
        "qwen2.5-max",
        "some-new-model",
        None,
    ]
    battles = pl.DataFrame({"model_a": raw, "model_b": list(reversed(raw))})
    out = add_canonical_columns(battles, aliases)
    assert out.get_column("model_a").to_list() == raw  # raw names stay
    assert out.get_column("model_a_canonical").to_list() == [
        "amazon.nova-pro-v1:0",
        "claude-3-5-sonnet-20241022",
        "claude-opus-4-20250514-thinking-16k",
        "claude-opus-4-20250514",
        "claude-sonnet-4-20250514",
        "o3-2025-04-16",
        "llama-3.3-70b-instruct",
        "gemini-2.5-pro",
        "qwen-max-2025-01-25",  # lmarena.ai's qwen2.5-max
        "some-new-model",
        None,
    ]
    assert out.get_column("model_b_canonical").to_list() == list(
        reversed(out.get_column("model_a_canonical").to_list())
    )
    assert out.columns == ["model_a", "model_b", "model_a_canonical", "model_b_canonical"]


def test_canonical_columns_require_model_columns() -> None:
    with pytest.raises(ValueError, match="model_b"):
        add_canonical_columns(pl.DataFrame({"model_a": ["x"]}), load_aliases())


# ---------------------------------------------------------------------------
# a user alias file
# ---------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_user_alias_file_overrides_and_extends(tmp_path: Path) -> None:
    user = _write(
        tmp_path / "aliases.csv",
        "alias,canonical,provider,note\n"
        "amazon-nova-pro-v1.0,amazon-nova-pro-v1.0,,undo the packaged alias\n"
        "Our Opus,claude-opus-4-0,,chains through the packaged alias\n"
        "internal-model-7,internal-model-7,ACME,a new model\n"
        "o3,o3,OpenAI Inc.,keep o3 apart; new provider name\n",
    )
    table = load_aliases(user)
    mapping = dict(table.select("alias", "canonical").iter_rows())
    provider = dict(table.select("canonical", "provider").unique().iter_rows())
    source = dict(table.select("alias", "source").iter_rows())
    assert mapping["amazon-nova-pro-v1.0"] == "amazon-nova-pro-v1.0"
    assert mapping["our-opus"] == "claude-opus-4-20250514"
    assert mapping["internal-model-7"] == "internal-model-7"
    assert mapping["o3"] == "o3"
    assert mapping["o4-mini"] == "o4-mini-2025-04-16"  # packaged rows still there
    assert provider["internal-model-7"] == "ACME"
    assert provider["claude-opus-4-20250514"] == "Anthropic"
    assert provider["o3"] == "OpenAI Inc."
    # the packaged row still says who makes that name
    assert provider["amazon-nova-pro-v1.0"] == "Amazon"
    assert source["our-opus"] == str(user)
    assert source["o4-mini"] == "package"
    battles = pl.DataFrame(
        {"model_a": ["amazon-nova-pro-v1.0", "OUR OPUS"], "model_b": ["o3", "o4-mini"]}
    )
    out = add_canonical_columns(battles, table)
    assert out.get_column("model_a_canonical").to_list() == [
        "amazon-nova-pro-v1.0",
        "claude-opus-4-20250514",
    ]
    assert out.get_column("model_b_canonical").to_list() == ["o3", "o4-mini-2025-04-16"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,canonical\nx,y\n", r"missing column\(s\) \['alias'\]"),
        ("alias,canonical\nx,\n", r"empty alias or canonical on line\(s\) \[2\]"),
        ("alias,canonical\nx,y\nX,z\n", "alias 'x' maps to different canonical names"),
        ("alias,canonical\nx,y\ny,x\n", "alias cycle"),
        ("alias,canonical,provider\nx,y,A\ny,y,B\n", "canonical 'y' is given providers"),
    ],
)
def test_bad_user_alias_file(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path / "user.csv", text)
    with pytest.raises(AliasTableError, match=message) as err:
        load_aliases(path)
    assert str(path) in str(err.value)


def test_a_user_merge_across_providers_names_the_users_file(tmp_path: Path, golden) -> None:
    """Mapping an Amazon and an OpenAI model to one name makes the packaged rows conflict: the error
    names the packaged lines and the user file that mapped them together (it named the package only)."""
    path = _write(tmp_path / "user.csv", "alias,canonical\namazon.nova-pro-v1:0,one-model\n"
                                         "chatgpt-4o-latest-20250326,one-model\n")
    with pytest.raises(AliasTableError) as merged:
        load_aliases(path)
    assert str(merged.value).startswith("package: ") and f"; {path} maps" in str(merged.value)
    golden.check("load", "aliases: a user's merge across providers",
                 re.sub(r"\(lines \[[\d, ]+\]\)", "(lines <packaged lines>)", str(merged.value)))


def test_missing_user_alias_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_aliases(tmp_path / "nope.csv")


# ---------------------------------------------------------------------------
# merged names
# ---------------------------------------------------------------------------


def test_merged_names_report(aliases: pl.DataFrame) -> None:
    battles = pl.DataFrame(
        {
            "id": ["1", "2", "3", "4", "5"],
            "model_a": [
                "claude-opus-4-20250514",
                "Claude Opus 4 (20250514)",
                "claude-opus-4-0",
                "gemini-2.5-pro",
                "amazon-nova-pro-v1.0",
            ],
            "model_b": [
                "gemini-2.5-pro",
                "claude_opus_4_20250514",
                "gemini-2.5-pro",
                "o3-2025-04-16",
                "gemini-2.5-pro",
            ],
        }
    )
    report = merged_names(battles, aliases)
    assert report.schema == pl.Schema(MERGED_NAMES_SCHEMA)
    assert report.to_dicts() == [
        {
            "canonical": "claude-opus-4-20250514",
            "raw_names": [
                "Claude Opus 4 (20250514)",
                "claude-opus-4-0",
                "claude-opus-4-20250514",
                "claude_opus_4_20250514",
            ],
            "n_raw_names": 4,
            "n_battles": 3,
            "via_alias": ["claude-opus-4-0"],
        }
    ]
    renamed = merged_names(battles, aliases, include_renamed=True)
    assert renamed.get_column("canonical").to_list() == [
        "amazon.nova-pro-v1:0",
        "claude-opus-4-20250514",
    ]
    assert renamed.row(0, named=True)["via_alias"] == ["amazon-nova-pro-v1.0"]
    # the canonical columns, when present, are used as they are
    assert merged_names(add_canonical_columns(battles, aliases)).equals(report)


def test_no_merges_among_distinct_real_names(aliases: pl.DataFrame) -> None:
    names = aliases.filter(pl.col("alias") == pl.col("canonical")).get_column("alias")
    battles = pl.DataFrame({"model_a": names, "model_b": names.shift(1, fill_value=names[-1])})
    assert merged_names(battles, aliases, include_renamed=True).height == 0


# ---------------------------------------------------------------------------
# arena.models
# ---------------------------------------------------------------------------


def test_models_table_values(aliases: pl.DataFrame) -> None:
    t0 = dt.datetime(2025, 5, 1, 12, 0)
    battles = pl.DataFrame(
        {
            "id": ["b1", "b2", "b3", "b4", "b5"],
            "model_a": [
                "claude-opus-4-20250514",
                "Claude Opus 4 (20250514)",
                "o3",
                "gemini-2.5-pro",
                "new-model",
            ],
            "model_b": [
                "gemini-2.5-pro",
                "o3-2025-04-16",
                "gemini-2.5-pro",
                "gemini-2.5-pro",  # a self-battle counts once
                None,  # a null name is left out
            ],
            "timestamp": [t0 + dt.timedelta(days=d) for d in (0, 1, 2, 3, 4)],
        }
    )
    categories = pl.DataFrame(
        {
            "battle_id": ["b1", "b2", "b3", "b4", "b5", "b1", "b3", "b2", "b3"],
            "category": [
                "overall",
                "overall",
                "overall",
                "overall",
                "overall",
                "math",
                "math",
                "coding",
                "something_else",
            ],
        }
    )
    table = models_table(add_canonical_columns(battles, aliases), categories, aliases)
    assert table.schema == pl.Schema(MODELS_SCHEMA)
    rows = {row["model"]: row for row in table.to_dicts()}
    assert list(rows) == [
        "claude-opus-4-20250514",
        "gemini-2.5-pro",
        "new-model",
        "o3-2025-04-16",
    ]
    zero = {f"battles_{c}": 0 for c in CATEGORIES}
    assert rows["claude-opus-4-20250514"] == {
        "model": "claude-opus-4-20250514",
        "provider": "Anthropic",
        "aliases": ["Claude Opus 4 (20250514)", "claude-opus-4-20250514"],
        "n_battles": 2,
        "first_battle": t0,
        "last_battle": t0 + dt.timedelta(days=1),
        **zero,
        "battles_overall": 2,
        "battles_math": 1,
        "battles_coding": 1,
    }
    assert rows["gemini-2.5-pro"] == {
        "model": "gemini-2.5-pro",
        "provider": "Google",
        "aliases": ["gemini-2.5-pro"],
        "n_battles": 3,
        "first_battle": t0,
        "last_battle": t0 + dt.timedelta(days=3),
        **zero,
        "battles_overall": 3,
        "battles_math": 2,
    }
    assert rows["o3-2025-04-16"]["aliases"] == ["o3", "o3-2025-04-16"]
    assert rows["o3-2025-04-16"]["battles_math"] == 1
    assert rows["new-model"]["provider"] is None
    assert rows["new-model"]["n_battles"] == 1


def test_models_table_without_timestamps(aliases: pl.DataFrame) -> None:
    battles = add_canonical_columns(
        pl.DataFrame({"id": ["1"], "model_a": ["o3"], "model_b": ["gemma-3-27b-it"]}), aliases
    )
    table = models_table(battles, pl.DataFrame({"battle_id": ["1"], "category": ["overall"]}))
    assert table.get_column("first_battle").null_count() == 2
    assert table.get_column("battles_overall").to_list() == [1, 1]
    with pytest.raises(ValueError, match="model_a_canonical"):
        models_table(battles.drop("model_a_canonical"), pl.DataFrame())


def test_models_counted_in_duckdb_equal_the_frames(aliases: pl.DataFrame) -> None:
    """model_facts_in_duckdb (the asset's path, over stored relations) gives the table and the merged names
    the frames give: self-battles, null names, a null id, repeated and unknown categories."""
    import duckdb

    t0 = dt.datetime(2025, 5, 1, 12, 0)
    battles = add_canonical_columns(pl.DataFrame({
        "id": ["b1", "b2", "b3", "b4", "b5", None, "b7"],
        "model_a": ["claude-opus-4-20250514", "Claude Opus 4 (20250514)", "o3", "gemini-2.5-pro", "new-model",
                    "o3", "claude_opus_4_20250514"],
        "model_b": ["gemini-2.5-pro", "o3-2025-04-16", "gemini-2.5-pro", "gemini-2.5-pro", None, "o3",
                    "claude-opus-4-0"],
        "timestamp": [t0 + dt.timedelta(days=d) for d in (0, 1, 2, 3, 4, 5)] + [None],
    }), aliases)
    categories = pl.DataFrame({
        "battle_id": ["b1", "b2", "b3", "b4", "b5", "b1", "b3", "b2", "b3", "b1", "b7", None],
        "category": ["overall", "overall", "overall", "overall", "overall", "math", "math", "coding",
                     "something_else", "math", "coding", "overall"],
    })
    with duckdb.connect() as con:
        con.register("battles", battles.to_arrow())
        con.register("categories", categories.to_arrow())
        facts = model_facts_in_duckdb(con, '"battles"', '"categories"')
    table = models_table(facts, aliases=aliases)
    assert table.equals(models_table(battles, categories, aliases))
    assert table.height == 4 and table.get_column("battles_coding").sum() == 3
    for renamed in (False, True):
        merged = merged_names(facts, aliases, include_renamed=renamed)
        assert merged.equals(merged_names(battles, aliases, include_renamed=renamed))
        assert merged.height > 0


# ---------------------------------------------------------------------------
# invisible characters and look-alike names
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "raw",
    [
        "gemini\u200b-2.5-pro",  # zero-width space
        "gemini-2.5\u2060-pro",  # word joiner
        "\ufeffgemini-2.5-pro",  # byte-order mark
        "gem\u00adini-2.5-pro",  # soft hyphen
        "gemini-2.5-pro\u202e",  # right-to-left override
        "gemini\u00a02.5\u3000pro",  # no-break space, ideographic space
        "gemini\u20292.5\u2003pro",  # paragraph separator, em space
        # default-ignorable code points that are not format characters (they were kept)
        "gemini\u034f-2.5-pro",  # combining grapheme joiner (Mn)
        "gemini-2.5-pro\ufe0f",  # variation selector 16 (Mn)
        "\u115fgemini-2.5-pro",  # Hangul choseong filler (Lo)
        "gemini-2.5\u1160-pro",  # Hangul jungseong filler (Lo)
        "gemini-2.5-pro\u3164",  # Hangul filler (Lo)
        "\uffa0gemini-2.5-pro",  # halfwidth Hangul filler (Lo)
        "gemini-2.5-pro\U000e0101",  # variation selector 18 (Mn, supplementary plane)
        "gemini-2.5-pro\x01",  # a control character other than whitespace (Cc)
        # blank characters that are not default-ignorable: a space, as they look
        "gemini-2.5-pro\u2800",  # braille pattern blank (So)
        "gemini\u28002.5\u2800pro",
    ],
)
def test_normalization_removes_format_characters_and_whitespace_variants(raw: str) -> None:
    assert normalize_names([raw]) == ["gemini-2.5-pro"]


def test_normalization_removes_every_default_ignorable_code_point() -> None:
    """Every code point of Unicode's Default_Ignorable_Code_Point, as the ``regex`` package's own Unicode
    database lists it (another implementation than the Polars regex the normalization uses)."""
    import regex

    ignorable = regex.findall(r"\p{Default_Ignorable_Code_Point}", "".join(map(chr, range(0x110000))))
    assert len(ignorable) > 4000 and "\u034f" in ignorable and "\U000e0fff" in ignorable
    out = normalize_names(f"o3{c}-mini{c}" for c in ignorable)
    assert set(out) == {"o3-mini"}


def test_blank_characters_are_derived_from_the_character_names() -> None:
    blanks = blank_characters()
    assert {"\u2800", "\u3164", "\u115f", "\u1160", "\uffa0"} <= set(blanks)
    # a named blank or gap filler that draws something, and White_Space characters, are not in it
    assert not {"\u2422", "\u303f", "\ua8f9", "\u2420", " ", "\u3000"} & set(blanks)


#: One model spelled six ways that look the same: the plain name, then with a combining grapheme joiner,
#: a variation selector 16, a Hangul filler, a halfwidth Hangul filler and a braille blank.
SIX_SPELLINGS = ["gemini-2.5-pro", "gemini\u034f-2.5-pro", "gemini-2.5-pro\ufe0f", "gemini-2.5\u3164-pro",
                 "\uffa0gemini-2.5-pro", "gemini-2.5-pro\u2800"]


def test_six_spellings_that_look_the_same_are_one_model(aliases) -> None:
    battles = pl.DataFrame({"id": [str(i) for i in range(6)], "model_a": SIX_SPELLINGS, "model_b": ["o3-mini"] * 6})
    canon = add_canonical_columns(battles, aliases)
    assert set(canon.get_column("model_a_canonical")) == {"gemini-2.5-pro"}
    table = models_table(canon, pl.DataFrame({"battle_id": ["0"], "category": ["overall"]}), aliases)
    assert table.get_column("model").to_list() == ["gemini-2.5-pro", "o3-mini"]
    assert table.row(0, named=True)["aliases"] == sorted(SIX_SPELLINGS)


def test_names_whose_visible_rendering_is_equal_are_reported_even_unmerged() -> None:
    """confusable_pairs works on the names as given: six spellings that render alike are 15 pairs."""
    pairs = confusable_pairs(pl.DataFrame({"model": [*SIX_SPELLINGS, "o3-mini"]}))
    assert pairs.height == 15
    assert set(pairs.get_column("skeleton")) == {"gernini-2.5-pro"}
    assert {frozenset(p) for p in pairs.select("model", "other").rows()} == {
        frozenset((a, b)) for i, a in enumerate(SIX_SPELLINGS) for b in SIX_SPELLINGS[i + 1:]}
    # a blank inside a name looks like a space, not like nothing
    inner = confusable_pairs(pl.DataFrame({"model": ["gemini 2.5", "gemini\u28002.5", "gemini2.5"]}))
    assert inner.select("model", "other").rows() == [("gemini 2.5", "gemini\u28002.5")]


def test_cyrillic_look_alike_is_not_merged_but_reported() -> None:
    cyrillic = "g\u0435mini-2.5-pro"  # CYRILLIC SMALL LETTER IE
    assert normalize_names([cyrillic]) == [cyrillic]  # normalization never merges scripts
    models = pl.DataFrame({"model": ["gemini-2.5-pro", cyrillic, "gpt-4o", "o3-mini", None]})
    pairs = confusable_pairs(models)
    assert pairs.to_dicts() == [
        {"model": "gemini-2.5-pro", "other": cyrillic, "skeleton": "gernini-2.5-pro"}
    ]


def test_skeleton_matches_uts39_examples() -> None:
    # UTS #39 section 4: "paypal" with a Cyrillic a / digit l look-alikes; 1 and l share a prototype
    frame = pl.DataFrame({"s": ["p\u0430ypal", "paypal", "1", "l", "\u0391"]})  # Greek capital alpha
    out = frame.select(skeleton_expr("s")).to_series().to_list()
    assert out[0] == out[1]
    assert out[2] == out[3] == "l"
    assert out[4] == "A"


def test_alias_row_merges_a_confusable_pair(tmp_path) -> None:
    cyrillic = "g\u0435mini-2.5-pro"
    extra = tmp_path / "aliases.csv"
    extra.write_text(f"alias,canonical\n{cyrillic},gemini-2.5-pro\n", encoding="utf-8")
    aliases = load_aliases(extra)
    battles = pl.DataFrame({"model_a": [cyrillic, "gemini\u200b-2.5-pro"], "model_b": ["o3-mini", "o3-mini"]})
    canon = add_canonical_columns(battles, aliases)
    assert canon.get_column("model_a_canonical").to_list() == ["gemini-2.5-pro", "gemini-2.5-pro"]
    assert confusable_pairs(canon.select(pl.col("model_a_canonical").alias("model"))).is_empty()


def test_real_model_names_have_no_confusable_pair() -> None:
    names = pl.read_csv(REAL_CSV, columns=["model_a", "model_b"], infer_schema=False)
    canonical = pl.concat([names["model_a"], names["model_b"]]).to_frame("raw").select(
        normalize_name_expr("raw").alias("model"))
    assert confusable_pairs(canonical).is_empty()


def test_a_blank_glyph_its_name_does_not_announce_is_a_blank() -> None:
    """U+1D159 MUSICAL SYMBOL NULL NOTEHEAD draws nothing: a name differing from another only by it made a
    second model and no confusable warning (issue 38, item 8). It is a blank now, like the braille blank."""
    null_notehead = "\U0001d159"
    assert null_notehead in blank_characters()
    assert normalize_names([f"gpt-4o{null_notehead}", f"gpt{null_notehead}4o"]) == ["gpt-4o", "gpt-4o"]
    pairs = confusable_pairs(pl.DataFrame({"model": ["gpt-4o", f"gpt-4o{null_notehead}", "gpt 4o",
                                                     f"gpt{null_notehead}4o", "gpt4o"]}))
    assert {frozenset(p) for p in pairs.select("model", "other").rows()} == {
        frozenset(("gpt-4o", f"gpt-4o{null_notehead}")), frozenset(("gpt 4o", f"gpt{null_notehead}4o"))}
