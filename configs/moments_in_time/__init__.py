"""moments_in_time configs."""
