"""kinetics400 configs."""
