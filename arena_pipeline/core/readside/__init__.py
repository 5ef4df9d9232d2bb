"""What readers are shown beyond the published tables: tables derived from them (no presentation)."""
