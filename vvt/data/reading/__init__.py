"""Reading: where records come from and how a host reads them (sources, their registry, files, streams, errors)."""
