"""CTCLoss-4 (time-major form) lowered onto stock OpenVINO operators (spec sections 12.1, 11.5).

The core is OpenVINO's own CTCLoss-4 (opset4). Around it sit the layout adapters the forms need
(time-major to batch-major, mask to lengths, pads removed anywhere, blank C-1), guards for the
defects of OpenVINO's CPU kernel that spec section 12.2 lists (named by their ids in the registry,
``ctcop/data/defects.json``) and the guards that make the graph a total function (spec 11.5):
D1, D2, D3, D8, D9, D10 in :func:`guarded_loss`; D6 in :func:`mask_codes`, :func:`label_codes`
and :func:`narrowed_faults`; D7 in :func:`runtime_nan` and :func:`_read_out`; rules 3.1, 3.3
and shapes that disagree in :func:`sample_faults`; rule 4.4 in :func:`_read_out`.

Rules every graph keeps: the kernel and every gather only see classes [0, C-2] of valid samples;
a sample the kernel must not see gets the dummy sample of :func:`_kernel_loss`, valid for every T
and C; integers are range-checked on a float32 copy before the CPU plugin's narrowing to int32
can wrap them (D6); +inf and NaN are computed from run-time zeros, never taken from constants (D7).
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset15 as ops

from .stage import mark

DUMMY_LOG_PROB = -1.0e4
WIDE = 2.0**31  # a label at or beyond this (read as float32) is never a class
NARROWED = (ov.Type.i64, ov.Type.u64, ov.Type.u32)  # what the CPU plugin wraps to int32 (D6)


def i64(value: object) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.int64))


def f32(value: float) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.float32))


def _shift(values: ov.Output, fill: ov.Node, axis: int) -> ov.Node:
    """2-D ``values`` moved one step along ``axis``, ``fill`` entering at the front."""
    begin = [0, 0]
    begin[axis] = 1
    padded = ops.pad(values, i64(begin), i64([0, 0]), "constant", fill)
    return ops.slice(padded, i64([0]), i64([-1]), i64([1]), i64([axis]))


def positions(values: ov.Output) -> ov.Node:
    """0, 1, ..., W-1 for [N, W] ``values``."""
    width = ops.gather(ops.shape_of(values, "i64"), i64(1), i64(0))
    return ops.range(i64(0), width, i64(1), "i64")


def fitted(values: ov.Output, shape: ov.Output, fill: ov.Node) -> ov.Node:
    """``values`` (of static rank) cut or padded with ``fill`` to ``shape`` (spec 11.5)."""
    rank = (values.output(0) if isinstance(values, ov.Node) else values).get_partial_shape().rank.get_length()
    cut = ops.slice(values, i64([0] * rank), shape, i64([1] * rank))
    return ops.pad(cut, i64([0] * rank), ops.subtract(shape, ops.shape_of(cut, "i64")), "constant", fill)


def disagrees(values: ov.Output, shape: ov.Output) -> ov.Node:
    """Scalar: the shape of ``values`` is not ``shape``."""
    return ops.reduce_logical_or(ops.not_equal(ops.shape_of(values, "i64"), shape), i64([0]), keep_dims=False)


def mask_codes(sequence_mask: ov.Output, shape: ov.Output) -> tuple[ov.Node, ov.Node]:
    """The mask fitted to [T, N] as float32 0 and 1, 2 for any other value (D6), and the columns
    that break rule 3.1 [N]: a value other than 0 and 1, or a 1 after a 0.

    D6: the CPU plugin narrows int64, uint64 and uint32 inputs to int32 by wrapping (2**32 reads
    as 0) before an integer operator sees them; a Convert straight to float32 still reads the true
    value, and only 0 and 1 can pass, which float32 holds exactly."""
    values = ops.convert(sequence_mask, "f32")
    valid = ops.logical_or(ops.equal(values, f32(0.0)), ops.equal(values, f32(1.0)))
    codes = fitted(ops.select(valid, values, f32(2.0)), shape, f32(0.0))
    rises = ops.greater(codes, _shift(codes, f32(1.0), 0))  # a first 2 always rises
    return codes, ops.reduce_logical_or(rises, i64([0]), keep_dims=False)


def label_codes(labels: ov.Output, classes: ov.Output, shape: ov.Output) -> tuple[ov.Node, ov.Node]:
    """Labels fitted to [N, T] as int64, -2 for every value other than -1 and [0, C-2], and the rows
    that break rule 3.3 [N]. Range tested on a float32 copy first (D6: float32 orders every integer
    correctly against -1 and 2**31); the narrowed integers are used only where that copy shows them
    in [-1, 2**31)."""
    wide = ops.convert(labels, "f32")
    values = ops.convert(labels, "i64")  # exact wherever ``wide`` is in [-1, 2**31)
    out_of_range = ops.logical_or(ops.less(wide, f32(-1.0)), ops.greater_equal(wide, f32(WIDE)))
    not_class = ops.logical_and(
        ops.not_equal(values, i64(-1)), ops.greater_equal(values, ops.subtract(classes, i64(1)))
    )
    codes = fitted(ops.select(ops.logical_or(out_of_range, not_class), i64(-2), values), shape, i64(-1))
    return codes, ops.reduce_logical_or(ops.equal(codes, i64(-2)), i64([1]), keep_dims=False)


def runtime_nan(like: ov.Output) -> ov.Node:
    """NaN of the element type and shape of ``like``, computed (0/0) at run time (D7: under float16
    inference precision, an explicit hint and the default on ARM CPUs, the CPU plugin turns an inf
    or NaN constant into 65504)."""
    zeros = ops.multiply(like, ops.convert_like(f32(0.0), like))
    return ops.divide(zeros, zeros)


def narrowed_faults(inputs: ov.Output, sequence_mask: ov.Output, labels: ov.Output) -> ov.Node | None:
    """[N]: samples whose mask column or label row holds a value outside int32's range, where the
    declared type is one the CPU plugin narrows to int32 by wrapping before an op sees it (D6);
    None when neither is. Every such value breaks rule 3.1 or 3.3, so such a sample is faulty;
    the custom layer, which sees the wrapped values, is guarded with this (spec 12.3)."""
    dims = ops.shape_of(inputs, "i64")
    found = []
    for values, order, axis in ((sequence_mask, [0, 1], 0), (labels, [1, 0], 1)):
        if values.get_element_type() in NARROWED:
            wide = fitted(ops.convert(values, "f32"), ops.gather(dims, i64(order), i64(0)), f32(0.0))
            outside = ops.logical_or(ops.less(wide, f32(-WIDE)), ops.greater_equal(wide, f32(WIDE)))
            found.append(ops.reduce_logical_or(outside, i64([axis]), keep_dims=False))
    return None if not found else found[0] if len(found) == 1 else ops.logical_or(found[0], found[1])


def _compact(values: ov.Output, keep: ov.Output, fill: ov.Output) -> tuple[ov.Node, ov.Node]:
    """Stable move of each row's kept entries to its front (rest ``fill``), and the counts [N]."""
    kept = ops.convert(keep, "i64")
    counts = ops.reduce_sum(kept, i64([1]), keep_dims=True)
    before = ops.subtract(ops.cumsum(kept, i64(1)), i64(1))
    after = ops.add(counts, ops.subtract(ops.cumsum(ops.subtract(i64(1), kept), i64(1)), i64(1)))
    moved = ops.scatter_elements_update(values, ops.select(keep, before, after), values, i64(1))
    in_target = ops.less(positions(values), counts)
    return ops.select(in_target, moved, fill), ops.squeeze(counts, i64([1]))


def processed_targets(values: ov.Output, blank: ov.Output, collapse: bool) -> tuple[ov.Node, ov.Node]:
    """Targets [N, T] (rule 3.3: every -1 removed; 3.4: repeats collapsed if asked) and lengths [N]
    from int64 ``values`` that hold only -1 and classes."""
    targets, lengths = _compact(values, ops.not_equal(values, i64(-1)), blank)
    if collapse:
        in_target = ops.less(positions(values), ops.unsqueeze(lengths, i64(1)))
        starts_run = ops.not_equal(targets, _shift(targets, i64(-1), 1))
        targets, lengths = _compact(targets, ops.logical_and(in_target, starts_run), blank)
    return targets, lengths


def sample_faults(inputs: ov.Output, sequence_mask: ov.Output, labels: ov.Output) -> tuple[ov.Node, ov.Node, ov.Node]:
    """Active frames [T, N] and label values [N, T] (-1 or classes) with every faulty sample emptied,
    and the faults [N]: rule 3.1 in the sample's column, 3.3 in its row, or a batch-level fault
    (shapes that disagree, C = 0: spec 11.5).

    A label the kernel would use as an index outside [0, C) reads or writes outside its tensors (a
    SIGSEGV, or a loss of -2.4e13; D11 for the released form's input), so a faulty sample reaches it
    as the dummy. Mask and labels whose shapes disagree with the logits (possible where the dims
    are dynamic) are cut or padded to [T, N] and [N, T] before any operator pairs them."""
    dims = ops.shape_of(inputs, "i64")
    frames_by_batch = ops.gather(dims, i64([0, 1]), i64(0))
    batch_by_frames = ops.gather(dims, i64([1, 0]), i64(0))
    classes = ops.gather(dims, i64(2), i64(0))
    mask, column_faults = mask_codes(sequence_mask, frames_by_batch)
    codes, row_faults = label_codes(labels, classes, batch_by_frames)
    shapes = ops.logical_or(disagrees(sequence_mask, frames_by_batch), disagrees(labels, batch_by_frames))
    batch_fault = ops.logical_or(shapes, ops.equal(classes, i64(0)))
    faults = ops.logical_or(ops.logical_or(column_faults, row_faults), batch_fault)
    active = ops.logical_and(ops.equal(mask, f32(1.0)), ops.logical_not(ops.unsqueeze(faults, i64(0))))
    values = ops.select(ops.unsqueeze(faults, i64(1)), i64(-1), codes)
    return active, values, faults


def _kernel_loss(
    log_probs: ov.Output,
    frame_counts: ov.Output,
    targets: ov.Output,
    target_lengths: ov.Output,
    usable: ov.Output,
    merge_repeated: bool,
) -> ov.Node:
    """The native kernel on batch-major log-probabilities: ``usable`` samples get their targets,
    the others the dummy (D1, D2, faulty samples). The dummy is one frame and one label: frame 0
    and class 0 when the input has a frame and two or more classes; otherwise an appended frame
    and/or classes of log-probability -1e4 (the dummy class is then class 1), so it is valid for
    every T and C, including T = 0 (D8), C = 1 and C = 0."""
    dims = ops.shape_of(log_probs, "i64")
    classes = ops.gather(dims, i64([2]), i64(0))
    extra_frame = ops.convert(ops.equal(ops.gather(dims, i64([0]), i64(0)), i64([0])), "i64")
    extra_class = ops.maximum(ops.subtract(i64([2]), classes), i64([0]))
    padded = ops.pad(
        ops.transpose(log_probs, i64([1, 0, 2])),
        i64([0, 0, 0]),
        ops.concat([i64([0]), extra_frame, extra_class], 0),
        "constant",
        ops.convert_like(f32(DUMMY_LOG_PROB), log_probs),
    )
    blank = ops.squeeze(ops.maximum(ops.subtract(classes, i64([1])), i64([0])), i64([0]))
    dummy_class = ops.squeeze(ops.minimum(extra_class, i64([1])), i64([0]))
    kernel_targets = ops.select(
        ops.unsqueeze(usable, i64([1])),
        ops.pad(targets, i64([0, 0]), ops.concat([i64([0]), extra_frame], 0), "constant", blank),
        dummy_class,
    )
    one = i64(1)
    return ops.ctc_loss(
        padded,
        ops.select(usable, frame_counts, one),
        kernel_targets,
        ops.select(usable, target_lengths, one),
        blank,
        preprocess_collapse_repeated=False,
        ctc_merge_repeated=merge_repeated,
        unique=False,
    )


def _read_out(
    precise: ov.Output,
    log_probs: ov.Output,
    active: ov.Output,
    target_lengths: ov.Output,
    usable: ov.Output,
    kernel: ov.Output,
    faults: ov.Output,
) -> ov.Node:
    """The loss [N]: the kernel's for usable samples; the all-blank loss for empty targets, +inf
    for targets longer than their frames (4.4); NaN for non-finite active frames (4.4) and faults
    (11.5); +0.0, never -0.0. Finiteness is tested as ``x - x == 0`` (0 for every finite x,
    subnormals included; NaN for inf and NaN): the CPU plugin's IsFinite is false for subnormals."""
    zero = ops.convert_like(f32(0.0), precise)
    finite = ops.equal(ops.subtract(precise, precise), zero)  # not IsFinite: false for subnormals on CPU
    finite_frames = ops.reduce_logical_and(finite, i64([2]), keep_dims=False)
    nonfinite = ops.reduce_logical_or(ops.logical_and(active, ops.logical_not(finite_frames)), i64([0]), False)
    last_class = ops.slice(log_probs, i64([-1]), i64([np.iinfo(np.int32).max]), i64([1]), i64([2]))
    blank_log_probs = ops.reduce_sum(last_class, i64([2]), keep_dims=False)  # 0 when C = 0
    blank_sums = ops.reduce_sum(ops.select(active, blank_log_probs, zero), i64([0]), keep_dims=False)
    all_blank = ops.subtract(zero, blank_sums)
    # +inf and NaN made at run time (D7): under f16 inference precision the CPU plugin turns an inf
    # or NaN *constant* into 65504, while computed ones survive (spec 12.2).
    zeros = ops.multiply(ops.convert_like(target_lengths, precise), zero)
    infinity = ops.divide(ops.convert_like(f32(1.0), precise), zeros)
    loss = ops.select(usable, kernel, ops.select(ops.equal(target_lengths, i64(0)), all_blank, infinity))
    loss = ops.select(ops.equal(loss, zero), zero, loss)
    return ops.select(ops.logical_or(nonfinite, faults), runtime_nan(loss), loss)


def guarded_loss(
    inputs: ov.Output,
    active: ov.Output,
    values: ov.Output,
    faults: ov.Output,
    *,
    preprocess_collapse_repeated: bool,
    merge_repeated: bool,
) -> ov.Node:
    """The [N] loss of time-major ``inputs`` [T, N, C] whose rules are already read: ``active``
    [T, N] the frames, ``values`` [N, T] int64 holding only -1 and classes [0, C-2], ``faults``
    [N] the samples whose loss is NaN (emptied in ``active`` and ``values``). Sections 3.4 and 4
    around the native kernel, guarded against its defects (spec 12.2):

    * D3 the kernel exponentiates raw logits (overflow/underflow for |logits| >~ 90): it is fed
      log-softmax values, which are <= 0, so its own normalisation is exact;
    * D1 an empty target crashes the process, D2 label_length > logit_length raises instead of
      giving +inf, D8 a batch with no frame returns uninitialised memory: such samples get their
      loss from :func:`_read_out` and the kernel a dummy (:func:`_kernel_loss`);
    * D9 the kernel compares the lengths before its own processing, D10 its collapse is wrong: pads
      are removed and repeats collapsed here, and the kernel gets preprocess_collapse_repeated =
      false and unique = false."""
    precise = inputs if inputs.get_element_type() in (ov.Type.f32, ov.Type.f64) else ops.convert(inputs, "f32")
    classes = ops.gather(ops.shape_of(inputs, "i64"), i64(2), i64(0))
    blank = ops.maximum(ops.subtract(classes, i64(1)), i64(0))  # C - 1 (0 for C = 0, all NaN then)
    targets, target_lengths = processed_targets(values, blank, preprocess_collapse_repeated)
    frame_counts = ops.reduce_sum(ops.convert(active, "i64"), i64([0]), keep_dims=False)
    usable = ops.logical_and(ops.greater(target_lengths, i64(0)), ops.less_equal(target_lengths, frame_counts))
    log_probs = ops.log_softmax(precise, 2)
    kernel = _kernel_loss(log_probs, frame_counts, targets, target_lengths, usable, merge_repeated)
    loss = _read_out(precise, log_probs, active, target_lengths, usable, kernel, faults)
    return ops.convert_like(loss, inputs)


def lower(
    inputs: ov.Output,
    sequence_mask: ov.Output,
    labels: ov.Output,
    *,
    preprocess_collapse_repeated: bool,
    merge_repeated: bool,
) -> ov.Node:
    """The [N] loss of the spec's time-major CTCLoss-4, built from stock OpenVINO operators; on
    input that breaks a rule, NaN for the samples that break it (spec 11.5). Its nodes are named
    as a stage (:func:`ctcop.openvino.stage.mark`)."""
    attributes = {"preprocess_collapse_repeated": preprocess_collapse_repeated, "merge_repeated": merge_repeated}
    active, values, faults = sample_faults(inputs, sequence_mask, labels)
    loss = guarded_loss(inputs, active, values, faults, **attributes)
    sources = {"inputs": inputs, "sequence_mask": sequence_mask, "labels": labels}
    return mark(loss, sources, "time_major", attributes)
