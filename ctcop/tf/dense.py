"""``tf.nn.ctc_loss`` with dense labels, written as TensorFlow's ``CTCLoss`` op (spec section 15).

TensorFlow computes ``tf.nn.ctc_loss`` with dense labels (and Keras 3's ``keras.ops.ctc_loss``
and ``keras.losses.CTC``, which call it) in TensorFlow code, a ``While`` loop over the frames,
not with the ``CTCLoss`` op. :func:`ctc_loss` takes the same arguments and passes the labels on as a
SparseTensor (the first ``label_length[i]`` entries of row i), so the graph holds the op, which
``ctcop.openvino_extensions()`` maps exactly; :func:`redirect_ctc_loss` makes ``tf.nn.ctc_loss``
this function while a model is traced, so a Keras model's loss becomes the op. Imports tensorflow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..process.frameworks import framework

tf = framework("tensorflow")
_TF_CTC_LOSS = tf.nn.ctc_loss


def sparse_labels(labels: Any, label_length: Any) -> Any:
    """The first ``label_length[i]`` entries of each row of dense ``labels`` [N, S] as a SparseTensor."""
    labels = tf.convert_to_tensor(labels)
    indices = tf.where(tf.sequence_mask(label_length, tf.shape(labels)[1]))
    values = tf.cast(tf.gather_nd(labels, indices), tf.int32)
    return tf.SparseTensor(indices, values, tf.cast(tf.shape(labels), tf.int64))


def ctc_loss(
    labels: Any,
    logits: Any,
    label_length: Any,
    logit_length: Any,
    logits_time_major: bool = True,
    unique: Any = None,
    blank_index: int | None = None,
    name: str | None = None,
) -> Any:
    """``tf.nn.ctc_loss`` (dense ``labels`` [N, S] and ``label_length`` [N]; ``blank_index``
    default 0, negative counted from the end) computed by the ``CTCLoss`` op; SparseTensor
    labels are passed on as they are. Eagerly TensorFlow's op raises where spec 15 says so
    (an empty target among them); converted with ``ctcop.openvino_extensions()`` it gives the
    values of spec 15."""
    if not isinstance(labels, tf.SparseTensor):
        labels = sparse_labels(labels, label_length)
    return _TF_CTC_LOSS(
        labels,
        logits,
        None,
        logit_length,
        logits_time_major=logits_time_major,
        unique=unique,
        blank_index=0 if blank_index is None else blank_index,
        name=name,
    )


@contextlib.contextmanager
def redirect_ctc_loss() -> Iterator[None]:
    """While active, ``tf.nn.ctc_loss`` is :func:`ctc_loss`: trace or save a model under it (a
    Keras 3 model with ``keras.losses.CTC`` or ``keras.ops.ctc_loss`` included)."""
    tf.nn.ctc_loss = ctc_loss
    try:
        yield
    finally:
        tf.nn.ctc_loss = _TF_CTC_LOSS
