"""Studies: sweeps of training runs and their results.

  sweep     a study's trials as dicts of config overrides (`axis`, `product`, `variants`, ...) and their names
  runner    runs a sweep's trials, one `vvt train` process each, and records their state: one worker of many
  claims    which worker trains a trial: atomic claims with a lease its owner renews (filesystem or GCS)
  results   a sweep's results table (CSV, Markdown) and plot (PNG)
  slurm     a sweep as one SLURM job array (`vvt sweep --launch slurm`): the sbatch script, its options, sbatch

Imports train, config, convert, data, models and vvt.fileio; never cli or inspection.
"""
