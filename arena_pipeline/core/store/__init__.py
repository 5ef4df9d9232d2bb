"""The warehouse: DuckDB reads and writes, the dump and publication records, builds and table versions."""
