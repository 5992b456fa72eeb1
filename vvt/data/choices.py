"""The choices of the dataset section's choice fields: the values the input pipeline accepts (no TensorFlow).

The pipeline checks a dataset config against them (`pipeline`, `sampling`, `normalization`) and the run-config
validation (`vvt.config.validation`) reports a bad one before any work; the fields and their defaults are in
`vvt.config.dataset`. The source names are the registry's (`vvt.data.reading.registry`).
"""
from vvt.data.reading import registry

SOURCES = tuple(registry.SOURCES)             # name: dmvr (TFRecords) | tfds | video_folder (videos + a CSV)
SAMPLING_SCHEMES = ('stride', 'segment')      # sampling: rate sampling | TSN, one frame per segment
SHORT_VIDEO_POLICIES = ('loop', 'pad')        # short_video_policy: wrap around | repeat the last frame
SPATIAL_CROPS = (1, 3)                        # num_spatial_crops: centre | left, centre, right
NORMALIZATIONS = ('imagenet', 'zero_centre')  # normalization: mean/std | [-1, 1]
ON_ERROR = ('raise', 'skip')                  # on_error: a bad record raises (naming it) | is counted and dropped
WHOLE_VIDEO = 'all'                           # num_test_clips: tile each whole video (views vary per video)
AUTOAUGMENT_POLICIES = ('imagenet',)          # autoaugment (None = off): Cubuk et al. 2018's ImageNet policy

# dataset field -> its choices
CHOICES = {
    'name': SOURCES,
    'on_error': ON_ERROR,
    'short_video_policy': SHORT_VIDEO_POLICIES,
    'sampling': SAMPLING_SCHEMES,
    'normalization': NORMALIZATIONS,
    'num_spatial_crops': SPATIAL_CROPS,
}

# dataset field -> its choices, where None (off) is allowed too
OPTIONAL_CHOICES = {
    'autoaugment': AUTOAUGMENT_POLICIES,
}
