"""The number of videos a split holds, counted without TensorFlow where its files allow it.

    num_videos(spec, 'train')   # == vvt.data.pipeline.num_videos(spec, 'train')

A DMVR split (local TFRecord files) is counted from its record headers (`tfrecord_index.count_records`), so a
process that only needs the size of an epoch (a sweep checking its trials' schedules, `vvt memory`) imports no
TensorFlow; any other source is counted by making it (`vvt.data.pipeline.num_videos`).
"""


def num_videos(spec, split: str = 'train') -> int:
  """Videos (records) of `split` of DataSpec `spec`, the count `vvt.data.pipeline.num_videos` gives."""
  if spec.name != 'dmvr':
    from vvt.data import pipeline
    return pipeline.num_videos(spec, split)
  from vvt.data.reading import tfrecord_index
  field = 'train_files' if split == 'train' else 'eval_files'
  files = getattr(spec, field)
  if not files:
    raise ValueError(f'dataset.{field} is empty: point it at the {split!r} TFRecords')
  return tfrecord_index.count_records(files, spec.data_dir, spec.on_error)
