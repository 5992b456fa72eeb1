"""howto100m configs."""
