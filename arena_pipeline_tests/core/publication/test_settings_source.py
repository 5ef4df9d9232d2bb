"""core.publication.settings_source: the ranking settings a publication records, read back."""

from __future__ import annotations

import dataclasses

from arena_pipeline.core.publication.settings_source import ranking_settings, source_publication
from arena_pipeline.core.ranking import RankingConfig


def test_recorded_ranking_settings_read_back_as_ranking_config():
    """An earlier record without a later setting equals a full one at that setting's default (the same
    fit, so settings_changed is False), whatever it records beyond this version's settings."""
    def row(ranking):
        return {"settings": {"tables": {"leaderboard": {"ranking": ranking}}}}

    full = dataclasses.asdict(RankingConfig(ties="drop"))
    earlier = {k: v for k, v in full.items() if k != "style_bootstrap_rounds"} | {"retired": 1}
    assert ranking_settings(row(full)) == ranking_settings(row(earlier)) == RankingConfig(ties="drop")
    assert ranking_settings(row(full)) != ranking_settings(row({"ties": "half"}))
    assert ranking_settings(row({})) is None and ranking_settings(None) is None
    assert ranking_settings(row({"display_min_battles": -1})) is None  # not settings of this version


def test_a_runs_settings_tag_names_its_publication():
    assert source_publication("publication 3") == 3 and source_publication(" publication 12 ") == 12
    assert source_publication(None) is None and source_publication("publication three") is None
