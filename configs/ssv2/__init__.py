"""ssv2 configs."""
