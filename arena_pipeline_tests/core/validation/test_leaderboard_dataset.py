"""LMArena's ratings history (lmarena-ai/leaderboard-dataset) as a published board, on a constructed copy of its layout
(``data/external/leaderboard_dataset``: 8 models on three publications, each 10 points above the one before, the
style-controlled subset 5 points above the plain one)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import polars as pl
import pytest

from arena_pipeline.core.dataset.models import load_aliases
from arena_pipeline.core.validation.external import (
    BoardFormatError,
    compare_leaderboard,
    load_category_map,
    read_published_board,
)
from arena_pipeline.core.validation.leaderboard_dataset import (
    REPO_ID,
    choose_date,
    download,
    is_history_location,
    local_files,
    read_board,
    read_history,
)

DATA = Path(__file__).parents[2] / "data"
HISTORY = DATA / "external" / "leaderboard_dataset"
BOARD = DATA / "benchmarks" / "board.csv"  # the same 8 models, ratings of the first publication


def rating(board: pl.DataFrame, category: str, method: str, model: str = "gemma-3-27b-it") -> float:
    return board.filter(category=category, method=method, model=model).get_column("rating").item()


def test_reads_the_publication_nearest_the_last_vote_with_each_subsets_method(golden):
    files = local_files(HISTORY)
    assert sorted(files) == ["text", "text_style_control"]
    read = read_history(files, near=dt.datetime(2025, 8, 1, 12, 30))
    assert {s["publish_date"] for s in read.subsets.values()} == {"2025-08-14"}
    assert read.subsets["text"]["chosen"].endswith("(2025-08-01)")
    golden.check("boards", "published history: the date chosen, nearest the last vote", read.subsets["text"]["chosen"])
    assert read.subsets["text"]["dates"] == 3 and read.publish_date() == "2025-08-14"
    board = read.board
    # 'full' is the overall board, 'hard_6' hard_prompt; the subset says the method
    assert rating(board, "overall", "bt") == 1340.0 + 10 and rating(board, "overall", "bt_style") == 1340.0 + 15
    assert rating(board, "hard_prompt", "bt") == 1350.0
    assert board.filter(category="overall", method="bt", model="gemma-3-27b-it").select(
        "ci_lower", "ci_upper").row(0) == (1342.0, 1358.0)
    assert board.filter(category="overall", method="bt").height == 9  # the model of one publication
    assert read.record() == {"dataset": REPO_ID, "revision": None, "subsets": read.subsets}
    assert len(read.sha256()) == 64 and read.sha256() != read_history(files).sha256()


def test_a_configured_date_is_read_and_one_the_history_lacks_is_refused_with_the_nearest(golden):
    files = local_files(HISTORY)
    read = read_history(files, publish_date="2025-06-02", near=dt.date(2025, 11, 30))
    assert read.subsets["text"]["chosen"] == "as configured"
    assert rating(read.board, "overall", "bt") == 1340.0
    with pytest.raises(BoardFormatError) as lacking:
        read_history(files, publish_date="2025-06-03")
    assert "2025-06-03" in str(lacking.value) and "2025-06-02, 2025-08-14" in str(lacking.value)
    golden.check("boards", "published history: a date it lacks", str(lacking.value), {str(HISTORY): "<history>"})
    with pytest.raises(BoardFormatError, match="'last summer' is not a date"):
        read_history(files, publish_date="last summer")


def test_without_a_vote_date_the_last_publication_is_read_and_its_unknown_category_is_kept():
    read = read_history(local_files(HISTORY))
    assert read.subsets["text"]["publish_date"] == "2025-11-05"
    assert rating(read.board, "overall", "bt") == 1360.0
    expert = read.board.filter(category="expert")
    assert expert.height == 16 and not expert.get_column("category_known").any()


def test_choose_date_takes_the_earlier_of_two_equally_near():
    dates = [dt.date(2025, 1, 1), dt.date(2025, 1, 11)]
    chosen, why = choose_date(dates, None, dt.date(2025, 1, 6))
    near, _ = choose_date(dates, None, dt.date(2025, 1, 2))
    assert chosen == near == dt.date(2025, 1, 1) and why.endswith(" (2025-01-06)")  # the vote's date, not the board's
    assert choose_date(dates, None, None)[0] == dt.date(2025, 1, 11)


def test_one_subsets_file_is_read_alone_and_its_folder_names_the_method(tmp_path):
    style = HISTORY / "text_style_control" / "full-00000-of-00001.parquet"
    assert is_history_location(style) and is_history_location(HISTORY)
    assert not is_history_location(BOARD) and not is_history_location(tmp_path)
    read = read_history(local_files(style), near=dt.date(2025, 6, 1))
    assert read.board.get_column("method").unique().to_list() == ["bt_style"]
    plain = tmp_path / "history.parquet"
    shutil.copy(HISTORY / "text" / "full-00000-of-00001.parquet", plain)
    assert read_history(local_files(plain)).board.get_column("method").unique().to_list() == ["bt"]


def test_compared_with_our_board_the_shift_is_the_chosen_publications():
    ours = pl.read_csv(BOARD).with_columns(category=pl.lit("overall"), method=pl.lit("bt"), dump_revision=pl.lit("r"))
    ours = pl.concat([ours, ours.with_columns(method=pl.lit("bt_style"))]).with_columns(
        pl.col("rating", "ci_lower", "ci_upper") - 250)
    theirs = read_history(local_files(HISTORY), near=dt.date(2025, 11, 1)).board
    summary, _, _ = compare_leaderboard(ours, theirs, None, str(HISTORY))
    shifts = dict(summary.filter(category="overall").select("method", "median_shift").iter_rows())
    assert shifts == pytest.approx({"bt": 270.0, "bt_style": 275.0})
    assert summary.filter(category="overall").get_column("n_matched").to_list() == [8, 8]


def test_malformed_files_name_the_file_and_the_problem(tmp_path, golden):
    text = tmp_path / "text"
    text.mkdir()
    bad = text / "full-00000-of-00001.parquet"
    pl.DataFrame({"model_name": ["a"], "rating": [1.0], "category": ["full"]}).write_parquet(bad)
    with pytest.raises(BoardFormatError, match=r"missing column\(s\) \['leaderboard_publish_date'\]"):
        read_history(local_files(tmp_path))
    pl.DataFrame({"model_name": ["a", "a"], "rating": [1.0, 2.0], "category": ["full"] * 2,
                  "leaderboard_publish_date": ["2025-01-01"] * 2}).write_parquet(bad)
    with pytest.raises(BoardFormatError) as twice:
        read_history(local_files(tmp_path))
    golden.check("boards", "published history: a model twice in a category", str(twice.value))
    pl.DataFrame({"model_name": ["a", "b"], "rating": [1.0, 2.0], "category": ["full"] * 2,
                  "leaderboard_publish_date": ["2025-01-01T00:00:00", "2025-01-01"]}).write_parquet(bad)
    assert read_history(local_files(tmp_path)).subsets["text"]["publish_date"] == "2025-01-01"
    pl.DataFrame({"model_name": ["a"], "rating": [1.0], "category": ["full"],
                  "leaderboard_publish_date": [dt.datetime(2025, 1, 1, 9)]}).write_parquet(bad)
    assert read_history(local_files(tmp_path)).subsets["text"]["publish_date"] == "2025-01-01"
    pl.DataFrame({"model_name": ["a"], "rating": [1.0], "category": ["full"],
                  "leaderboard_publish_date": ["Jan 2025"]}).write_parquet(bad)
    with pytest.raises(BoardFormatError, match="leaderboard_publish_date is not a date"):
        read_history(local_files(tmp_path))
    bad.write_text("not parquet", encoding="utf-8")
    with pytest.raises(BoardFormatError, match="not a readable parquet file"):
        read_history(local_files(tmp_path))
    with pytest.raises(BoardFormatError, match="no text/text_style_control subset folder"):
        local_files(tmp_path / "text")


def test_read_board_takes_every_location_the_setting_may_name(tmp_path):
    """The arena-catalog JSON and a CSV as before (the file's hash), the history's folder (its publication), a
    malformed Hub location and an unreachable Hub as board problems (the comparison's check fails, the run stands)."""
    aliases, category_map = load_aliases(), load_category_map()
    for name in ("board.json", "board.csv"):
        board, read = read_board(str(DATA / "external" / name), aliases, category_map)
        assert board.equals(read_published_board(DATA / "external" / name)) and list(read) == ["sha256"]
    board, read = read_board(str(HISTORY), aliases, category_map, near=dt.date(2025, 6, 1))
    assert read["board_date"] == "2025-06-02" and read["history"]["subsets"]["text"]["chosen"].startswith("nearest")
    with pytest.raises(BoardFormatError, match="hf://datasets/<org>/<name>"):
        read_board("hf://datasets/no-name", aliases, category_map)
    with pytest.raises(BoardFormatError, match="the Hub did not serve it"):
        read_board(REPO_ID, aliases, category_map, cache_dir=tmp_path, endpoint="http://127.0.0.1:9")
    with pytest.raises(FileNotFoundError):
        read_board(str(tmp_path / "absent.json"), aliases, category_map)


@pytest.mark.slow  # starts the fake Hub server
def test_reads_the_history_from_the_fake_hub_pinned_to_a_commit(tmp_path):
    from arena_pipeline_dev.hub_server import fake_hub_server

    files = {f"{s}/full-00000-of-00001.parquet": HISTORY / s / "full-00000-of-00001.parquet"
             for s in ("text", "text_style_control")}
    with fake_hub_server(tmp_path / "hub") as hub:
        sha = hub.publish(REPO_ID, "main", {**files, "text/latest-00000-of-00001.parquet": b"not read"})
        got, names, commit = download(REPO_ID, None, tmp_path / "cache", endpoint=hub.url)
        assert commit == sha and names["text"] == f"hf://datasets/{REPO_ID}@{sha}/text/full-00000-of-00001.parquet"
        gets = len(hub.file_gets())
        assert gets == 2
        requests = len(hub.requests())
        again, _, _ = download(REPO_ID, sha, tmp_path / "cache", endpoint=hub.url)  # the cache, no request
        assert again == got and len(hub.requests()) == requests
    read = read_history(got, near=dt.date(2025, 8, 20), revision=commit, names=names)
    local = read_history(local_files(HISTORY), near=dt.date(2025, 8, 20))
    assert read.board.equals(local.board) and read.sha256() == local.sha256()
    assert read.record()["revision"] == sha and read.subsets["text_style_control"]["file"].endswith(
        "text_style_control/full-00000-of-00001.parquet")
