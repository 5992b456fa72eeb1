"""Video data: the one entry the rest of vvt imports (`from vvt.data import make_train_iterator`).

Inside, by job: `reading` (sources and their registry, files, streams, errors), `transforms` (frames -> the
pixels the model sees), `writing` (datasets written to disk); `pipeline` (the iterators) and `examples` (the one
construction path) join them. See docs/data.md.

Outside vvt/data, code imports only the names below from `vvt.data`, never a submodule
(`tests/test_layering.py` checks it). Each name is imported when first asked for, so the config layer's names
(`CHOICES`, `missing_files`, ...) load no TensorFlow and the pipeline's load it only when used.
"""
import importlib

from vvt.data import tensorflow_import

# name -> (submodule of vvt.data, its name there)
_ENTRY = {
    # the run's data section, frozen; the choices of its fields
    'DataSpec': ('spec', 'DataSpec'),
    'CHOICES': ('choices', 'CHOICES'),
    'OPTIONAL_CHOICES': ('choices', 'OPTIONAL_CHOICES'),
    'WHOLE_VIDEO': ('choices', 'WHOLE_VIDEO'),
    # the input pipeline: batches of a DataSpec; what an iterator skipped comes from the iterator itself
    'make_train_iterator': ('pipeline', 'make_train_iterator'),
    'make_eval_iterator': ('pipeline', 'make_eval_iterator'),
    'num_videos': ('pipeline', 'num_videos'),
    'count_videos': ('train_size', 'num_videos'),  # the same count, without TensorFlow where the files allow
    'skipped_videos': ('pipeline', 'skipped_videos'),
    'DataError': ('reading.errors', 'DataError'),
    'skip_report': ('reading.skips', 'skip_report'),
    'skip_line': ('reading.skips', 'skip_line'),
    'start_skip_account': ('reading.skips', 'start_account'),  # a run's skips are its own
    # checks before any work: files, lists, clip spans, clip sizes
    'missing_files': ('reading.patterns', 'missing_files'),
    'is_remote': ('reading.patterns', 'is_remote'),
    'resolved_patterns': ('reading.patterns', 'resolved_patterns'),
    'reads_files': ('reading.registry', 'reads_files'),
    'list_problems': ('preflight', 'list_problems'),
    'clip_problems': ('preflight', 'clip_problems'),
    'unlabelled_problems': ('preflight', 'unlabelled_problems'),
    'batch_memory_problem': ('preflight', 'batch_memory_problem'),
    'short_videos_line': ('reading.video_lengths', 'short_line'),
    # names of classes and videos
    'class_names': ('reading.names', 'class_names'),
    'dataset_class_names': ('reading.names', 'dataset_class_names'),
    'label_names': ('reading.names', 'label_names'),
    'video_ids': ('reading.names', 'video_ids'),
    'is_video_list': ('reading.names', 'is_video_list'),
    'is_unlabelled_list': ('reading.names', 'is_unlabelled_list'),
    'manifest_class_names': ('reading.names', 'manifest_class_names'),
    'read_class_list': ('reading.names', 'read_class_list'),
    'video_list_class_names': ('reading.names', 'video_list_class_names'),
    # texts -> token ids: a video-text model's own tokenizer.json (vvt/data/transforms/tokenizer.py)
    'load_tokenizer': ('transforms.tokenizer', 'load_tokenizer'),
    'TokenizerError': ('transforms.tokenizer', 'TokenizerError'),
    'copy_tokenizer_files': ('transforms.tokenizer', 'copy_tokenizer_files'),
    'TOKENIZER_FILES': ('transforms.tokenizer', 'TOKENIZER_FILES'),
    # pixels: normalisation on the device, the views of a file or folder, windows of a long video
    'normalize': ('transforms.normalization', 'normalize'),
    'mean_std': ('transforms.normalization', 'mean_std'),
    'find_inputs': ('reading.video_files', 'find_inputs'),
    'load_views': ('transforms.views', 'load_views'),
    'views_per_video': ('transforms.views', 'views_per_video'),
    'open_frames': ('transforms.windows', 'open_frames'),
    'WindowStream': ('transforms.windows', 'WindowStream'),
    'parse_span': ('transforms.windows', 'parse_span'),
    'window_starts': ('transforms.windows', 'window_starts'),
    'window_views': ('transforms.windows', 'window_views'),
    'window_stem': ('transforms.windows', 'stem'),
    # temporal annotations of untrimmed videos (ActivityNet JSON, THUMOS14 files)
    'Annotations': ('reading.annotations', 'Annotations'),
    'VideoAnnotation': ('reading.annotations', 'VideoAnnotation'),
    'AnnotationError': ('reading.annotations', 'AnnotationError'),
    'read_annotations': ('reading.annotations', 'read_annotations'),
    'read_activitynet': ('reading.annotations', 'read_activitynet'),
    'read_thumos14': ('reading.annotations', 'read_thumos14'),
    'write_activitynet': ('reading.annotations', 'write_activitynet'),
    # feature sequences of long videos (`vvt features --window`): one .npy per video and sequences.json
    'SequenceWriter': ('feature_sequences', 'SequenceWriter'),
    'sequence_ids': ('feature_sequences', 'sequence_ids'),
    'read_sequence_index': ('feature_sequences', 'read_index'),
    'load_sequence': ('feature_sequences', 'load_sequence'),
    # datasets written to disk
    'write_synthetic': ('writing.synthetic', 'write_synthetic'),
    'write_untrimmed': ('writing.untrimmed', 'write_untrimmed'),
    'SYNTHETIC_CLASS_NAMES': ('writing.synthetic', 'CLASS_NAMES'),
    'convert_videos': ('writing.video_shards', 'convert'),
    'parse_worker': ('writing.shard_workers', 'parse_worker'),
    'workers_from_slurm': ('writing.shard_workers', 'from_slurm'),
    'worker_count': ('writing.shard_workers', 'worker_count'),
    'assemble_workers': ('writing.shard_workers', 'assemble'),
    # feature sequences of untrimmed videos with their segments (temporal action localisation)
    'open_sequences': ('reading.feature_sequences', 'open_sequences'),
    'SequenceError': ('reading.feature_sequences', 'SequenceError'),
    'sequences_skipped_line': ('reading.feature_sequences', 'skipped_line'),
    'sequence_truth': ('reading.feature_sequences', 'truth_of'),
    'write_synthetic_sequences': ('writing.synthetic_sequences', 'write_synthetic_sequences'),
    'sequence_train_batches': ('reading.feature_sequences', 'train_batches'),
    'sequence_eval_batches': ('reading.feature_sequences', 'eval_batches'),
    # TFRecord framing (TensorBoard event files are TFRecord files too)
    'masked_crc32c': ('reading.tfrecord_framing', 'masked_crc32c'),
}
__all__ = tuple(_ENTRY)


def __getattr__(name):
  """The entry's `name`, imported from its submodule on first use."""
  if name not in _ENTRY:
    raise AttributeError(f'module vvt.data has no entry {name!r} (its entries: vvt.data.__all__)')
  module, attribute = _ENTRY[name]
  with tensorflow_import.keras_left_unloaded():  # the submodule may import TensorFlow: not Keras with it
    value = getattr(importlib.import_module(f'vvt.data.{module}'), attribute)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(__all__))
