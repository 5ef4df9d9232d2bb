"""The publication gate (its rules, publish and retention), what it writes, and reads of the live publication."""
