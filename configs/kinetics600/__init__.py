"""kinetics600 configs."""
