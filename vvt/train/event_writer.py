"""TensorBoard event files written without TensorFlow: scalars, images and texts, as `tf.summary` writes them.

An event file is a TFRecord file (`vvt.data.masked_crc32c` frames each record) of `tensorboard.compat.proto`
`Event`s: first the file version, then one event per value (its tag, step, wall time and tensor). The values are
the tensors `tf.summary.scalar` / `image` / `text` write (a float32 scalar; `[width, height, png, ...]` strings;
a UTF-8 string) with the same plugin metadata and data class, so TensorBoard and `vvt results` read the files
as they read clu's TensorFlow-backed writer's. The file name is TensorFlow's:
`events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2`.
"""
import io
import itertools
import os
import socket
import struct
import time
from typing import Mapping

from etils import epath
import numpy as np
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto import summary_pb2
from tensorboard.compat.proto import tensor_pb2
from tensorboard.compat.proto import tensor_shape_pb2
from tensorboard.compat.proto import types_pb2

from vvt import data as data_lib
from vvt import fileio

_FILE_NUMBER = itertools.count()  # TensorFlow numbers the files a process opens: 0, 1, ...


def _metadata(plugin: str, data_class: int) -> summary_pb2.SummaryMetadata:
  return summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin),
                                     data_class=data_class)


def _shape(*dims: int) -> tensor_shape_pb2.TensorShapeProto:
  return tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])


def scalar_value(tag: str, value) -> summary_pb2.Summary.Value:
  """`tf.summary.scalar`'s value: the number as a float32 scalar tensor."""
  tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(),
                                  tensor_content=np.asarray(value, np.float32).reshape(()).tobytes())
  return summary_pb2.Summary.Value(tag=tag, tensor=tensor,
                                   metadata=_metadata('scalars', summary_pb2.DATA_CLASS_SCALAR))


def _uint8(images: np.ndarray) -> np.ndarray:
  """`tf.image.convert_image_dtype(images, tf.uint8, saturate=True)` for uint8 or float images in [0, 1]."""
  if images.dtype == np.uint8:
    return images
  if not np.issubdtype(images.dtype, np.floating):
    raise ValueError(f'images must be uint8 or float in [0, 1], not {images.dtype}')
  return np.clip(images.astype(np.float32) * np.float32(255.5), 0, 255).astype(np.uint8)


def _png(image: np.ndarray) -> bytes:
  """(H, W, C) uint8, C in 1, 3, 4 -> PNG bytes."""
  from PIL import Image
  buf = io.BytesIO()
  Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(buf, format='PNG')
  return buf.getvalue()


def image_value(tag: str, images) -> summary_pb2.Summary.Value:
  """`tf.summary.image`'s value of (H, W, C) or (N, H, W, C) images: [width, height, png_1, ..., png_N]."""
  images = _uint8(np.asarray(images))
  if images.ndim == 3:
    images = images[None]
  _, h, w, _ = images.shape
  strings = [str(w).encode(), str(h).encode()] + [_png(im) for im in images]
  tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=_shape(len(strings)), string_val=strings)
  return summary_pb2.Summary.Value(tag=tag, tensor=tensor,
                                   metadata=_metadata('images', summary_pb2.DATA_CLASS_BLOB_SEQUENCE))


def text_value(tag: str, text: str) -> summary_pb2.Summary.Value:
  """`tf.summary.text`'s value: the UTF-8 string as a scalar string tensor."""
  tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=_shape(), string_val=[text.encode()])
  return summary_pb2.Summary.Value(tag=tag, tensor=tensor,
                                   metadata=_metadata('text', summary_pb2.DATA_CLASS_TENSOR))


def _record(payload: bytes) -> bytes:
  """One TFRecord: length, its masked CRC-32C, the payload, its masked CRC-32C (little-endian)."""
  length = struct.pack('<Q', len(payload))
  crc = data_lib.masked_crc32c
  return length + struct.pack('<I', crc(length)) + payload + struct.pack('<I', crc(payload))


class EventWriter:
  """A clu `MetricWriter` (scalars, images, texts) writing one TensorBoard event file into `logdir`."""

  def __init__(self, logdir: str):
    fileio.makedirs(logdir)
    name = (f'events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.'
            f'{next(_FILE_NUMBER)}.v2')
    self._file = epath.Path(fileio.join(logdir, name)).open('wb')
    self._write(event_pb2.Event(wall_time=float(int(time.time())), file_version='brain.Event:2'))

  def _write(self, event: event_pb2.Event) -> None:
    self._file.write(_record(event.SerializeToString()))

  def _values(self, step: int, values) -> None:
    for value in values:
      self._write(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary_pb2.Summary(value=[value])))

  def write_scalars(self, step: int, scalars: Mapping) -> None:
    self._values(step, (scalar_value(k, v) for k, v in scalars.items()))

  def write_images(self, step: int, images: Mapping) -> None:
    self._values(step, (image_value(k, v) for k, v in images.items()))

  def write_texts(self, step: int, texts: Mapping[str, str]) -> None:
    self._values(step, (text_value(k, v) for k, v in texts.items()))

  def flush(self) -> None:
    self._file.flush()

  def close(self) -> None:
    if not self._file.closed:
      self._file.close()
