"""Checking what was built: the Great Expectations suites, published boards and benchmark scores."""
