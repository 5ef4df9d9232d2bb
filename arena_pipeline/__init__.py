"""arena_pipeline: LMArena votes to per-category leaderboards, orchestrated by Dagster."""
