"""Great Expectations suites as JSON data; installed as the package ``arena_pipeline.expectations``."""
