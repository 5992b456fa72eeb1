"""Video data by job: `reading` (sources and their registry, files, streams, errors), `transforms` (frames -> the
pixels the model sees), `writing` (datasets written to disk); `pipeline` (the iterators) and `examples` (the one
construction path) join them. See docs/data.md."""
