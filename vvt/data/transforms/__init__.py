"""Transforms: a video's frames -> the pixels the model sees (sampling, crops, augmentation, normalisation)."""
