"""The publication gate: its rules and policies, the settings a publication records, and publishing."""
