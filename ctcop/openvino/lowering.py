"""CTCLoss-4 (time-major form) lowered onto stock OpenVINO operators (spec section 12.1).

The core is OpenVINO's own CTCLoss-4 (opset4). Around it sit the layout adapters the forms need
(time-major to batch-major, mask to lengths, pads removed anywhere, blank C-1) and guards for the
defects of OpenVINO's CPU kernel that spec section 12.2 lists with their smallest inputs:

* G1 the kernel exponentiates raw logits (overflow/underflow for |logits| >~ 90): it is fed
  log-softmax values, which are <= 0, so its own normalisation is exact;
* G2 an empty target (label_length 0) crashes the process: such samples get the all-blank loss
  computed here, and the kernel gets a harmless dummy sample;
* G3 label_length > logit_length raises instead of giving +inf: after pad removal and collapse
  (done here, so the length is the processed length) such samples get +inf and a dummy;
* G4 a non-finite value in an active frame yields NaN for that sample (rule 4.4).

The dummy sample is one frame and one label: frame 0 and class 0 when the input has a frame and
a non-blank class; otherwise an appended frame and/or class of log-probability -1e4, so it is
valid for every T and C, including T = 0 and C = 1.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset15 as ops

DUMMY_LOG_PROB = -1.0e4


def _i64(value: object) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.int64))


def _shift_right(values: ov.Output, fill: ov.Node) -> ov.Node:
    padded = ops.pad(values, _i64([0, 1]), _i64([0, 0]), "constant", fill)
    return ops.slice(padded, _i64([0]), _i64([-1]), _i64([1]), _i64([1]))


def _positions(values: ov.Output) -> ov.Node:
    """0, 1, ..., W-1 for [N, W] ``values``."""
    width = ops.gather(ops.shape_of(values, "i64"), _i64(1), _i64(0))
    return ops.range(_i64(0), width, _i64(1), "i64")


def _compact(values: ov.Output, keep: ov.Output, fill: ov.Output) -> tuple[ov.Node, ov.Node]:
    """Stable move of each row's kept entries to its front (rest ``fill``), and the counts [N]."""
    kept = ops.convert(keep, "i64")
    counts = ops.reduce_sum(kept, _i64([1]), keep_dims=True)
    before = ops.subtract(ops.cumsum(kept, _i64(1)), _i64(1))
    after = ops.add(counts, ops.subtract(ops.cumsum(ops.subtract(_i64(1), kept), _i64(1)), _i64(1)))
    moved = ops.scatter_elements_update(values, ops.select(keep, before, after), values, _i64(1))
    in_target = ops.less(_positions(values), counts)
    return ops.select(in_target, moved, fill), ops.squeeze(counts, _i64([1]))


def processed_targets(labels: ov.Output, blank: ov.Output, collapse: bool) -> tuple[ov.Node, ov.Node]:
    """Targets [N, T] (rule 3.3: every -1 removed; 3.4: repeats collapsed if asked) and lengths [N]."""
    values = ops.convert(labels, "i64")
    targets, lengths = _compact(values, ops.not_equal(values, _i64(-1)), blank)
    if collapse:
        in_target = ops.less(_positions(values), ops.unsqueeze(lengths, _i64(1)))
        starts_run = ops.not_equal(targets, _shift_right(targets, _i64(-1)))
        targets, lengths = _compact(targets, ops.logical_and(in_target, starts_run), blank)
    return targets, lengths


def lower(
    inputs: ov.Output,
    sequence_mask: ov.Output,
    labels: ov.Output,
    *,
    preprocess_collapse_repeated: bool,
    merge_repeated: bool,
) -> ov.Node:
    """The [N] loss of the spec's time-major CTCLoss-4, built from stock OpenVINO operators."""
    precise = inputs if inputs.get_element_type() in (ov.Type.f32, ov.Type.f64) else ops.convert(inputs, "f32")
    active = ops.convert(sequence_mask, "boolean")
    frame_counts = ops.reduce_sum(ops.convert(active, "i64"), _i64([0]), keep_dims=False)
    zero = ops.convert_like(ops.constant(np.float32(0.0)), precise)
    finite_frames = ops.reduce_logical_and(ops.is_finite(precise), _i64([2]), keep_dims=False)
    nonfinite = ops.logical_and(active, ops.logical_not(finite_frames))
    nonfinite_count = ops.reduce_sum(ops.convert(nonfinite, "i64"), _i64([0]), keep_dims=False)
    log_probs = ops.log_softmax(precise, 2)

    dims = ops.shape_of(inputs, "i64")
    classes = ops.gather(dims, _i64(2), _i64(0))
    blank = ops.subtract(classes, _i64(1))
    targets, target_lengths = processed_targets(labels, blank, preprocess_collapse_repeated)

    # Kernel inputs, batch-major (G2, G3 dummies): a dummy sample is frame 0 with target (0); only
    # when there is no frame (T = 0) or no class other than the blank (C = 1) is a frame or class
    # of log-probability DUMMY_LOG_PROB appended (the dummy class is then the new class C = 1).
    batch_major = ops.transpose(log_probs, _i64([1, 0, 2]))
    dummy = ops.convert_like(ops.constant(np.float32(DUMMY_LOG_PROB)), precise)
    extra_frame = ops.convert(ops.equal(ops.gather(dims, _i64([0]), _i64(0)), _i64([0])), "i64")
    extra_class = ops.convert(ops.equal(ops.gather(dims, _i64([2]), _i64(0)), _i64([1])), "i64")
    padded = ops.pad(
        batch_major, _i64([0, 0, 0]), ops.concat([_i64([0]), extra_frame, extra_class], 0), "constant", dummy
    )
    usable = ops.logical_and(ops.greater(target_lengths, _i64(0)), ops.less_equal(target_lengths, frame_counts))
    one = _i64(1)
    kernel_targets = ops.select(
        ops.unsqueeze(usable, _i64([1])),
        ops.pad(targets, _i64([0, 0]), ops.concat([_i64([0]), extra_frame], 0), "constant", blank),
        ops.squeeze(extra_class, _i64([0])),
    )
    kernel = ops.ctc_loss(
        padded,
        ops.select(usable, frame_counts, one),
        kernel_targets,
        ops.select(usable, target_lengths, one),
        blank,
        preprocess_collapse_repeated=False,
        ctc_merge_repeated=merge_repeated,
        unique=False,
    )

    # Empty targets: the all-blank path (4.4); too long: +inf (4.4); non-finite frames: NaN.
    blank_log_probs = ops.squeeze(ops.gather(log_probs, ops.unsqueeze(blank, _i64([0])), _i64(2)), _i64([2]))
    all_blank = ops.negative(ops.reduce_sum(ops.select(active, blank_log_probs, zero), _i64([0]), keep_dims=False))
    infinity = ops.convert_like(ops.constant(np.float32(np.inf)), precise)
    nan = ops.convert_like(ops.constant(np.float32(np.nan)), precise)
    special = ops.select(ops.equal(target_lengths, _i64(0)), all_blank, infinity)
    loss = ops.select(usable, kernel, special)
    loss = ops.select(ops.greater(nonfinite_count, _i64(0)), nan, loss)
    return ops.convert_like(loss, inputs)
