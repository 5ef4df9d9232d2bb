"""The `RatingMethod` registry: a toy method registered here alone runs in `compute_rankings`; no method-name branch."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from pydantic import Field, ValidationError

import arena_pipeline
from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.labels import METHOD_LABELS, METHODS, PRIMARY_METHOD, STYLE_METHODS
from arena_pipeline.core.ranking import RankingConfig, catalogue, compute_rankings, leaderboard
from arena_pipeline.core.ranking.board import CategoryBoard
from arena_pipeline.core.ranking.config import RUN_SETTINGS, config_class, run_settings
from arena_pipeline.core.ranking.rating_method import RATING_METHODS, BoardResult, RatingMethod, register
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.core.ranking.types import Setting

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"


class WinRate(RatingMethod):
    """Toy method: a model's rating is the log-odds of its win rate on the board (ties count half)."""

    name = "win_rate"
    label = "Win rate (toy)"
    summary = "mean_win_rate"
    settings = {"win_rate_prior": Setting(float, Field(default=0.0, ge=0, description="Draws added to every "
                                                       "model's games (half a win each)."), run=True)}

    def fit(self, board: CategoryBoard) -> BoardResult:
        b, prior = board.board, self.setting(board, "win_rate_prior")
        score_a = np.where(b.o == 0, 1.0, np.where(b.o == 1, 0.0, 0.5))
        score = np.bincount(b.a, score_a, b.m) + np.bincount(b.b, 1.0 - score_a, b.m) + prior / 2
        games = np.bincount(b.a, minlength=b.m) + np.bincount(b.b, minlength=b.m) + prior
        rate = score / games
        frame, significance = b.frame(self.name, b.rate(np.log(rate / (1.0 - rate))), {})
        return BoardResult(frame, significance, {"models": b.m}, summary=float(rate.mean()))


@pytest.fixture
def win_rate() -> Iterator[RatingMethod]:
    """``WinRate`` registered for one test, then removed (the registry is the process's)."""
    register(WinRate)
    try:
        yield RATING_METHODS[WinRate.name]
    finally:
        del RATING_METHODS[WinRate.name]


@pytest.fixture(scope="module")
def battles() -> tuple[pl.DataFrame, pl.DataFrame]:
    frame = pl.read_parquet(FIXTURE)
    frame = frame.with_columns(math=pl.Series(np.arange(frame.height) % 3 == 0))
    return frame, tag_rows(frame.get_column("id"), [tag_categories(frame)[0]])


CONFIG = {"bootstrap_rounds": 0, "min_battles": 20, "display_min_battles": 130}


def test_a_method_registered_in_one_module_runs_and_is_on_the_leaderboard(win_rate, battles):
    config = RankingConfig(methods=("bt", "win_rate"), **CONFIG)
    out = compute_rankings(*battles, config)
    board = out.leaderboard
    toy = board.filter(pl.col("method") == "win_rate")
    bt = board.filter(pl.col("method") == "bt")
    assert toy.height == bt.height > 0
    assert toy.get_column("category").unique().sort().to_list() == ["math", "no_tie", "overall"]
    # the rating is the win rate's log-odds on the rating scale, anchored on the board's reference
    for category, rows in toy.partition_by("category", as_dict=True).items():
        anchor = out.metadata["anchors"][category[0]]  # None: centred on the mean
        logit = rows.select(model="model", x=(pl.col("win_rate") / (1 - pl.col("win_rate"))).log())
        x = logit.get_column("x")
        shift = x.mean() if anchor is None else logit.filter(pl.col("model") == anchor).get_column("x").item()
        expected = 1000 + 400 / math.log(10) * (x - shift)
        np.testing.assert_allclose(rows.get_column("rating").to_numpy(), expected.to_numpy(), atol=1e-9)
        assert out.metadata["mean_win_rate"][category[0]] == pytest.approx(rows.get_column("win_rate").mean())
        assert out.metadata["categories"][category[0]]["win_rate"] == {"models": rows.height}
    # boards sorted in registration order: after the built-in ones
    methods = board.filter(pl.col("category") == "overall").get_column("method").unique(maintain_order=True)
    assert methods.to_list() == ["bt", "win_rate"]
    assert toy.get_column("ci_method").unique().to_list() == ["none"]  # the toy gives no interval
    # a method added changes no other board
    alone = compute_rankings(*battles, RankingConfig(methods=("bt",), **CONFIG))
    assert bt.equals(alone.leaderboard)
    assert win_rate.label == "Win rate (toy)"


def test_a_method_declares_its_own_settings_once_in_its_class(win_rate, battles):
    """The toy's ``win_rate_prior``, declared in its class only: a field of the settings class of the
    registered methods, bounded as declared, a run setting, read by its fit and recorded with the run."""
    config_type = config_class(RATING_METHODS.values())
    assert "win_rate_prior" not in RUN_SETTINGS and run_settings(RATING_METHODS.values())[-1] == "win_rate_prior"
    with pytest.raises(ValidationError, match="win_rate_prior"):
        config_type(win_rate_prior=-1.0)
    plain, prior = (compute_rankings(*battles, config_type(methods=("win_rate",), win_rate_prior=p, **CONFIG))
                    for p in (0.0, 1_000.0))
    assert (plain.metadata["config"]["win_rate_prior"], prior.metadata["config"]["win_rate_prior"]) == (0.0, 1_000.0)
    spread = [out.leaderboard.get_column("rating").std() for out in (plain, prior)]
    assert spread[1] < spread[0] / 2  # a strong prior pulls every rate to one half
    # a settings class made before the method was registered: its fit reads the declared default
    before = compute_rankings(*battles, RankingConfig(methods=("win_rate",), **CONFIG))
    assert_frame_equal(before.leaderboard, plain.leaderboard)
    with pytest.raises(ValueError, match="already declared"):
        config_class([*RATING_METHODS.values(), win_rate])


def test_an_unregistered_method_is_refused_and_a_name_is_registered_once(win_rate):
    with pytest.raises(ValueError, match="non-empty subset of"):
        RankingConfig(methods=("bt", "elo"))
    assert RankingConfig(methods=("win_rate",)).methods == ("win_rate",)
    with pytest.raises(ValueError, match="already registered"):
        register(WinRate)


def test_the_built_in_methods_are_registered_in_board_order_with_their_labels_and_settings():
    assert tuple(RATING_METHODS) == METHODS
    fields = {f.name for f in dataclasses.fields(RankingConfig)}
    for name, method in RATING_METHODS.items():
        assert method.label == METHOD_LABELS[name]
        assert set(method.reads) <= fields and set(method.settings) <= fields, name


def test_compute_rankings_has_no_method_name_branch():
    """No string equal to a method's name and no test of ``config.methods`` in the ranking loop."""
    names = set(METHODS)
    for function in (leaderboard.compute_rankings, leaderboard._rank_category, leaderboard._prepare,
                     leaderboard._Parts.add, leaderboard._Parts.output):
        tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(function)))
        constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not constants & names, function.__name__
        compared = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)]
        assert not [c for c in compared if "methods" in c], function.__name__


def _golden_inputs(battles: pl.DataFrame) -> dict[str, tuple[pl.DataFrame, RankingConfig]]:
    """The inputs of the frames stored from main at 9ca29d5, before the registry: sessions on 4 votes
    in 5, and (``missing_style``) a fifth of the votes without style counts, ties dropped."""
    from arena_pipeline.core.ranking.style_control import style_columns

    n = battles.height
    battles = battles.with_columns(math=pl.Series(np.arange(n) % 3 == 0),
                                   creative_writing=pl.Series(np.arange(n) % 4 == 1))
    sessions = battles.with_columns(evaluation_session_id=pl.when(pl.int_range(n) % 5 != 0).then(
        (pl.int_range(n) // 3).cast(pl.String)))
    missing = sessions.with_columns(
        pl.when(pl.int_range(n) % 5 == 1).then(None).otherwise(pl.col(c)).alias(c) for c in style_columns())
    return {
        "sessions": (sessions, RankingConfig(bootstrap_rounds=20, style_bootstrap_rounds=5, display_min_battles=50)),
        "missing_style": (missing, RankingConfig(bootstrap_rounds=20, ties="drop", primary_interval="bootstrap")),
    }


@pytest.mark.parametrize("case", ["sessions", "missing_style"])
def test_the_loop_over_methods_gives_the_frames_of_the_ladder_it_replaced(case):
    """Every method, interval and style gap of ``compute_rankings`` as main computed them before the
    registry (stored from 9ca29d5 by the same inputs): the refactor moved no number. Since issue 44
    bt_style's primary interval is clustered by session on these boards (they carry sessions), so what
    it decides (its primary interval and the pairwise tests read from it) is compared apart: every
    other column of bt_style, and every column of the other methods, is as stored; the columns added
    since (the simultaneous rank sets, the unpenalised style coefficients) are not in the stored frames."""
    battles, config = _golden_inputs(pl.read_parquet(FIXTURE))[case]
    out = compute_rankings(battles, tag_rows(battles.get_column("id"), [tag_categories(battles)[0]]), config)
    primary = {"leaderboard": ("ci_lower", "ci_upper", "ci_method", "rank_ub", "rank_lb", "significantly_above",
                               "cluster_sandwich_lower", "cluster_sandwich_upper"),
               "pairwise_significance": ("ci_lower", "ci_upper", "ci_method", "significant"),
               "style_coefficients": ("ci_lower", "ci_upper", "ci_method")}
    for table, decided in primary.items():
        stored = pl.read_parquet(FIXTURE.parent / f"main_9ca29d5_{table}.parquet")
        expected = stored.filter(pl.col("case") == case).drop("case")
        assert expected.height > 0
        got = getattr(out, table).select(expected.columns)
        style = pl.col("method") == "bt_style" if "method" in expected.columns else pl.lit(True)
        assert_frame_equal(got.filter(~style), expected.filter(~style), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        assert_frame_equal(got.filter(style).drop(decided), expected.filter(style).drop(decided),
                           check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        methods = set(got.filter(style).get_column("ci_method"))
        # (a board with fewer than 2 shown models has no pairwise rows)
        assert methods == {"cluster_sandwich"} or (table == "pairwise_significance" and not methods)


class ScoredWinRate(WinRate):
    """The toy method, needing a battle column of its own (``judge_score``) that some dumps lack."""

    name = "scored_win_rate"
    needs = "the judge scores"

    def battle_columns(self) -> list[str]:
        return ["judge_score"]


def test_a_dump_lacking_a_methods_columns_gets_no_board_of_it_and_missing_columns_are_named(battles, golden):
    from arena_pipeline.core.ranking import per_dump_leaderboards

    register(ScoredWinRate)
    try:
        frame, tags = battles
        n = frame.height
        two = frame.with_columns(dump=pl.when(pl.int_range(n) % 2 == 0).then(pl.lit("d1")).otherwise(pl.lit("d2")),
                                 also_in_dumps=pl.lit(None, pl.String))
        two = two.with_columns(judge_score=pl.when(pl.col("dump") == "d1").then(pl.lit(1.0)))
        config = RankingConfig(methods=("bt", "scored_win_rate"), **CONFIG)
        combined = compute_rankings(two, tags, config).leaderboard
        boards, _ = per_dump_leaderboards(two, tags, config, combined)
        methods = {d[0]: set(rows.get_column("method")) for d, rows in boards.partition_by("dump", as_dict=True).items()}
        assert methods == {"d1": {"bt", "scored_win_rate"}, "d2": {"bt"}}
        with pytest.raises(ValueError) as lacking:
            compute_rankings(frame, tags, config)
        assert "['judge_score']" in str(lacking.value) and ScoredWinRate.name in str(lacking.value)
        golden.check("boards", "a method's column the votes lack", str(lacking.value))
    finally:
        del RATING_METHODS[ScoredWinRate.name]


def test_no_method_name_outside_the_ranking_step_but_through_the_registry():
    """Outside ``core/ranking/`` a method is reached by its role (``core.labels.PRIMARY_METHOD``,
    ``STYLE_METHODS``) or the registry, never by a string equal to a built-in method's name; the
    generated ``core.method_catalogue`` is the registry's image. The report's templates too."""
    package = Path(arena_pipeline.__file__).parent
    names = set(METHODS)
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative.startswith("core/ranking/") or relative == "core/method_catalogue.py":
            continue
        found += [f"{relative}:{n.lineno} {n.value!r}" for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, ast.Constant) and n.value in names]
    for path in sorted((package / "presentation" / "templates").glob("*.j2")):
        text = path.read_text()
        found += [f"{path.name}: {name!r}" for name in names for quote in "\"'" if f"{quote}{name}{quote}" in text]
    assert not found


def test_the_catalogue_is_generated_from_the_method_classes():
    """``core.method_catalogue`` (read by the CLI without the ranking step) is what the classes say:
    ``python -m arena_pipeline.core.ranking.catalogue`` regenerates it."""
    assert catalogue.CATALOGUE_PATH.read_text() == catalogue.catalogue_text()
    roles = {m.role: m.name for m in RATING_METHODS.values() if m.role}
    assert (PRIMARY_METHOD, STYLE_METHODS) == (roles["primary"], (roles["style"],))


@pytest.mark.slow
def test_a_registered_method_is_fitted_recorded_labelled_and_published(win_rate, tmp_path, capsys):
    """The toy method, registered and nothing else: the pipeline fits and publishes its boards (every
    registered method is a board by default), the run's settings record names it, the CLI prints its
    board under the class's label, and its label reaches ``core.labels`` (the CLI's path) from the class."""
    from arena_pipeline.cli import EXIT_OK, main
    from arena_pipeline.core.labels import method_label, ordered_methods
    from arena_pipeline.core.store.reader import open_newest
    from arena_pipeline.core.store.records import live_publication
    from arena_pipeline_tests.support.materialize import run_sample

    assert RankingConfig().methods == (*METHODS, "win_rate")
    assert (method_label("win_rate"), ordered_methods(["win_rate", "spectral", "bt"])) == (
        "Win rate (toy)", ["bt", "spectral", "win_rate"])
    assert run_sample(tmp_path).success
    warehouse = tmp_path / "warehouse.duckdb"
    with open_newest(str(warehouse)) as con:
        published = con.execute("SELECT method, count(*) FROM arena.leaderboard GROUP BY method").fetchall()
        ranking = live_publication(con, "arena")["settings"]["tables"]["leaderboard"]["ranking"]
    assert dict(published)["win_rate"] == dict(published)["bt"] > 0
    assert ranking["methods"] == [*METHODS, "win_rate"]
    capsys.readouterr()
    assert main(["leaderboard", "--warehouse", str(warehouse), "--method", "win_rate", "--top", "3"]) == EXIT_OK
    assert "Win rate (toy)" in capsys.readouterr().out
