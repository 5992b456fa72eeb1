"""The DMVR record format: one `tf.train.SequenceExample` per video.

* feature list `image/encoded` (configurable): one encoded JPEG per frame;
* context `clip/label/index` (int64; configurable, several keys for multi-head
  datasets, several values for multi-label ones, `dataset.multi_label`),
  `clip/label/text` (bytes, optional), `video_id` (bytes, optional), `caption/string` (bytes, one value per
  caption of the video, optional: DMVR's own name for captions).

Records live in TFRecord files. This module writes them; the readers parse them
(`vvt.data.reading.dmvr`) and walk the files' framing (`vvt.data.reading.tfrecord_framing`).
"""
import os

import tensorflow as tf

FRAMES_KEY = 'image/encoded'
LABEL_KEY = 'clip/label/index'
LABEL_TEXT_KEY = 'clip/label/text'
VIDEO_ID_KEY = 'video_id'
CAPTION_KEY = 'caption/string'  # DMVR's name (its `add_text`): the captions of a video, one value each


def encode_sequence_example(frames, labels, video_id=None, label_text=None,
                            frames_key=FRAMES_KEY, extra_context=None, captions=()):
  """Serialises one video.

  Args:
    frames: sequence of encoded images (bytes), one per frame.
    labels: int (stored under LABEL_KEY) or dict key -> int; a list of ints stores several values (the labels
      of a multi-label video).
    video_id: optional str.
    label_text: optional str stored under LABEL_TEXT_KEY.
    frames_key: feature-list key of the frames.
    extra_context: optional dict key -> int | str | bytes.
    captions: the video's captions (str), stored as the values of CAPTION_KEY in order.
  Returns:
    bytes of a tf.train.SequenceExample.
  """
  ex = tf.train.SequenceExample()
  ctx = ex.context.feature
  if not isinstance(labels, dict):
    labels = {LABEL_KEY: labels}
  for key, value in labels.items():
    ctx[key].int64_list.value.extend(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
  if video_id is not None:
    ctx[VIDEO_ID_KEY].bytes_list.value.append(str(video_id).encode())
  if label_text is not None:
    ctx[LABEL_TEXT_KEY].bytes_list.value.append(str(label_text).encode())
  if captions:
    ctx[CAPTION_KEY].bytes_list.value.extend(str(c).encode() for c in captions)
  for key, value in (extra_context or {}).items():
    if isinstance(value, int):
      ctx[key].int64_list.value.append(value)
    else:
      ctx[key].bytes_list.value.append(
          value if isinstance(value, bytes) else str(value).encode())
  feature_list = ex.feature_lists.feature_list[frames_key]
  for frame in frames:
    feature_list.feature.add().bytes_list.value.append(bytes(frame))
  # deterministic: the context is a proto map, whose order would otherwise
  # vary between processes (same input -> same bytes).
  return ex.SerializeToString(deterministic=True)


def write_records(path, records):
  """Writes serialized records to `path` atomically (temp file + rename)."""
  tmp = f'{path}.tmp-{os.getpid()}'
  with tf.io.TFRecordWriter(tmp) as writer:
    for record in records:
      writer.write(record)
  tf.io.gfile.rename(tmp, path, overwrite=True)
