"""Tests of the Dagster assets, one module per asset module."""
