"""Inspection: what a trained model does, looked at from its parameters and activations.

  attention_maps    every scheme's attention probabilities, recomputed from the model's own projections, and
                    the maps derived from them (class-token attention, rollout, per stage, frame to frame)
  attention_plots   pictures of those maps over the frames of a clip (PNG grids, GIF)
  timeline          a long video's class probabilities window by window: CSV, segments, timeline PNG

Imports train, config, convert, data, models and vvt.fileio; never cli or studies.
"""
