"""What changed between two publications' boards: arena.publication_changes and the CLI's ``changes``."""
