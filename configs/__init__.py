"""vvt run configs: one file per experiment, `get_config(arg)`; shared pieces in `configs.common`."""
