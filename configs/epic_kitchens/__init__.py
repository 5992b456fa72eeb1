"""epic_kitchens configs."""
