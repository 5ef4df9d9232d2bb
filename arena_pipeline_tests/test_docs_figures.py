"""The figures the docs quote about fit and interval widths are what the code computes on the committed real
votes (``python -m arena_pipeline_dev.docs_figures`` writes them): a change that moves one fails here."""

from __future__ import annotations

import pytest

from arena_pipeline_dev.docs_figures import FIGURES, PAGES, REPO_ROOT, compute, fill, main, names_in


@pytest.fixture(scope="module")
def figures():
    return compute()


def test_every_figure_is_on_a_page_and_each_page_says_what_the_code_computes(figures):
    marked = []
    for page in PAGES:
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        marked += names_in(text)
        assert fill(text, figures) == text, f"{page} is out of date: python -m arena_pipeline_dev.docs_figures"
    assert sorted(marked) == sorted(FIGURES)


def test_the_model_fit_figures_are_the_calibrated_baselines(figures):
    """The old claim (log-loss 0.6678 against an uncalibrated 0.6737) is gone; the table is the code's."""
    text = (REPO_ROOT / "docs" / "rankings.md").read_text(encoding="utf-8")
    assert "0.6737" not in text and "0.047" not in text
    table = [line for line in figures["model_fit"] if line.startswith("| overall |")]
    assert len(table) == 1 and "| 0.66777 | 0.66780 |" in table[0]
    assert "does not measurably beat them on any" in figures["model_fit"][0]


def test_the_comparison_figures_are_the_late_2025_boards(figures):
    assert "| overall | 46 | 0.84 | 13.7 | +262.3 | 16.4 |" in figures["published_board"]
    assert figures["alignment_shifts"].startswith("+262.5 (overall, 45 shown models matched)")


def test_a_drifted_figure_fails_the_check(tmp_path, figures):
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((REPO_ROOT / page).read_text(encoding="utf-8"), encoding="utf-8")
    for data in ("arena_pipeline_tests", "benchmarks"):
        (tmp_path / data).symlink_to(REPO_ROOT / data)
    assert main(["--root", str(tmp_path), "--check"]) == 0
    page = tmp_path / PAGES[0]
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("±11.5 points", "±11.4 points"), encoding="utf-8")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0
    assert page.read_text(encoding="utf-8") == text


def test_fill_replaces_inline_and_block_figures_with_the_block_indented():
    text = "a <!-- figures:x -->old<!-- /figures:x --> b\n  <!-- figures:y -->\n  old\n  <!-- /figures:y -->\n"
    assert fill(text, {"x": "1.5", "y": ["| t |", "", "end"]}) == (
        "a <!-- figures:x -->1.5<!-- /figures:x --> b\n  <!-- figures:y -->\n  | t |\n\n  end\n  <!-- /figures:y -->\n")
    with pytest.raises(ValueError, match="unknown figure"):
        fill("<!-- figures:z --><!-- /figures:z -->", {})


#: words that call an expected score (a tie counting 1/2) a chance of winning, or misname LMArena's rank rule
MISREADINGS = ("P(a beats b)", "that the favourite wins", "probability that side a wins",
               "significant-wins", "significant wins")


def test_no_page_template_or_docstring_calls_an_expected_score_a_chance_of_winning():
    sources = [*(REPO_ROOT / "docs").rglob("*.md"), *(REPO_ROOT / "arena_pipeline").rglob("*.py"),
               *(REPO_ROOT / "arena_pipeline" / "presentation" / "templates").glob("*.j2"), REPO_ROOT / "README.md"]
    found = [(path.relative_to(REPO_ROOT).as_posix(), words) for path in sources
             for words in MISREADINGS if words in path.read_text(encoding="utf-8")]
    assert found == []


def test_ranking_outputs_docstring_describes_todays_rank_bounds():
    from arena_pipeline.core.ranking.types import RankingOutput

    doc = " ".join((RankingOutput.__doc__ or "").split())
    assert "whose lower bound is above this model's upper bound" not in doc
    assert "``rank_ub`` is 1 + the number of non-provisional models significantly above this one" in doc
    assert "``rank_lb`` the number of non-provisional models not significantly below it" in doc
