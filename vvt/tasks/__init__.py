"""Tasks: what a run learns on top of a video backbone and how it is judged (`vvt.tasks.base`), by
`config.task.name` (`vvt.tasks.registry`)."""
