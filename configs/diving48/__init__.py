"""diving48 configs."""
