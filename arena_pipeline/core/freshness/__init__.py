"""What the sensors decide: whether the live board is fresh, and when a failed refresh is tried again."""
