"""Pure Polars/NumPy logic of the pipeline: no Dagster imports here."""
