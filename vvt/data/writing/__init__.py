"""Writing: datasets written to disk (videos -> DMVR TFRecords, the synthetic motion set, the record format)."""
