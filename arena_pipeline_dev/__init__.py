"""Development tools shared by the tests and the benchmarks: a fake Hugging Face Hub, synthetic dumps of the dataset family, independent reference implementations (not in the wheel)."""
