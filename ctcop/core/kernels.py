"""The compiled forward-backward kernels, one sample at a time (spec/ctcloss4.md, sections 4 and 5).

Each kernel computes one sample from its own logits, frame count and target alone, with the same
operations in the same order whatever the batch, the thread or the CPU, so results do not depend on
batch composition, thread count or run (:mod:`ctcop.core.lanes` repeats the loss in vector lanes,
with the same bits). The lattice is the extended label ``blank, g1, blank, ..., gL, blank``
(S = 2L + 1 states; both merge rules are the same lattice with different allowed moves). Log space
throughout: a state's update is ``top + ln(u0 + u1 + u2) + emission`` with ``u = exp(a - top)``,
``top`` the frame's largest variable, through :mod:`ctcop.core.logexp`; where the sum falls below
:data:`ctcop.core.logexp.EXACT_BELOW` the state is redone term by term, so no magnitude of logits
loses accuracy. Emissions (spec 4.1) come from two per-frame values formed once and kept. The
gradient (spec 5), softmax minus state occupancies, stores the forward variables every K frames and
recomputes each segment from its checkpoint in the backward sweep: O(S * (T/K + K) + C + T) memory.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import compiled, entry
from .logexp import EXACT_BELOW, exp_nonpositive, log_normal

NEG_INF = -math.inf


# -- small array helpers: loops, since numba compiles numpy's fills and array copies slowly ---------


@compiled
def fill(out: np.ndarray, start: int, stop: int, value: float) -> None:
    for k in range(start, stop):
        out[k] = value


@compiled
def _copy(source: np.ndarray, out: np.ndarray) -> None:
    for k in range(source.shape[0]):
        out[k] = source[k]


# -- over the classes of one frame ----------------------------------------------------------------


@compiled
def frame_normaliser(row: np.ndarray, work: np.ndarray) -> tuple[float, float]:
    """``top = max_c row[c]`` and ``ln sum_c exp(row[c] - top)`` of one frame's logits in float64
    (spec 4.1), both NaN if one is not finite. The log-softmax is ``(row[c] - top) - that``: the
    centred value first, so that adding a constant to a frame changes no bit. ``work`` holds C
    float64.

    The largest logits contribute exactly 1 each and are counted apart: the sum is ``log1p`` of the
    others, so a nearly certain frame keeps its tiny log-probabilities to full relative accuracy
    (logits [-40, 0] give ln p = -4.25e-18, not 0). The maximum and the sum run over eight
    interleaved lanes held in scalars (numba's arrays live
    in memory, and LLVM widens no floating-point reduction without fast-math), combined in a fixed
    order: the same bits on every CPU."""
    n = row.shape[0]
    blocks = n - n % 8
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = NEG_INF
    for c in range(0, blocks, 8):
        v0, v1, v2, v3 = np.float64(row[c]), np.float64(row[c + 1]), np.float64(row[c + 2]), np.float64(row[c + 3])
        v4, v5, v6, v7 = np.float64(row[c + 4]), np.float64(row[c + 5]), np.float64(row[c + 6]), np.float64(row[c + 7])
        m0, m1, m2, m3 = max(v0, m0), max(v1, m1), max(v2, m2), max(v3, m3)
        m4, m5, m6, m7 = max(v4, m4), max(v5, m5), max(v6, m6), max(v7, m7)
    top = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for c in range(blocks, n):
        top = max(np.float64(row[c]), top)
    bad = 0
    for c in range(n):
        bad += 0 if abs(row[c]) < math.inf else 1
    if bad > 0:
        return math.nan, math.nan
    tops = 0  # the terms exp(0) = 1 are counted apart, so that ln(1 + rest) is formed as log1p(rest)
    for c in range(n):
        centred = np.float64(row[c]) - top
        tops += 1 if centred == 0.0 else 0
        work[c] = exp_nonpositive(centred) if centred < 0.0 else 0.0
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for c in range(0, blocks, 8):
        s0, s1, s2, s3 = s0 + work[c], s1 + work[c + 1], s2 + work[c + 2], s3 + work[c + 3]
        s4, s5, s6, s7 = s4 + work[c + 4], s5 + work[c + 5], s6 + work[c + 6], s7 + work[c + 7]
    total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for c in range(blocks, n):
        total += work[c]
    return top, math.log1p(total + (tops - 1))


# -- the lattice of one sample ------------------------------------------------------------------


@compiled
def lattice(target: np.ndarray, blank: int, merge_repeated: bool, classes: np.ndarray, moves: np.ndarray) -> int:
    """The S = 2L + 1 states of a target of L labels: their classes into ``classes[:S]``, and
    into ``moves[0, :S]`` and ``moves[1, :S + 2]`` 1.0 where staying on s and skipping into s
    exist, else 0.0 (two trailing 0 pads). Returns S."""
    length = target.shape[0]
    states = 2 * length + 1
    fill(moves[0], 0, states, 1.0)
    fill(moves[1], 0, states + 2, 0.0)
    for s in range(states):
        classes[s] = blank
    for k in range(length):
        s = 2 * k + 1
        classes[s] = target[k]
        if not merge_repeated:
            moves[0, s] = 0.0
        if k > 0 and (not merge_repeated or target[k] != target[k - 1]):
            moves[1, s] = 1.0
    return int(states)


@compiled
def _frame_top(values: np.ndarray, start: int, stop: int) -> float:
    top = NEG_INF
    for s in range(start, stop):
        top = values[s] if values[s] > top else top
    return top


@compiled
def log_sum3(a0: float, a1: float, a2: float) -> float:
    """``ln(e^a0 + e^a1 + e^a2)`` term by term; -inf when all three are -inf. The largest term is
    1 after centring and the rest go through ``log1p``, so a sum just above the largest term keeps
    its excess to full relative accuracy."""
    top = max(a0, max(a1, a2))
    if top == NEG_INF:
        return NEG_INF
    if a0 == top:
        rest = math.exp(a1 - top) + math.exp(a2 - top)
    elif a1 == top:
        rest = math.exp(a0 - top) + math.exp(a2 - top)
    else:
        rest = math.exp(a0 - top) + math.exp(a1 - top)
    return top + math.log1p(rest)


@compiled
def log_terms(rest: float, units: float) -> float:
    """``ln(units + rest)`` for a count ``units`` of terms equal to 1 and the sum ``rest`` of the
    others: ``log1p(rest + units - 1)`` when there is a 1 (Goldberg's form, so that a sum just above
    1 keeps its excess to full relative accuracy), ``ln(rest)`` otherwise; branch-free."""
    excess = rest + (units - 1.0)
    whole = 1.0 + excess
    log = log_normal(rest if units == 0.0 else whole)
    log1p = excess if whole == 1.0 else log * (excess / (whole - 1.0))
    return log if units == 0.0 else log1p


@compiled
def exact_states(
    alpha: np.ndarray,
    out: np.ndarray,
    frame: tuple[np.ndarray, np.ndarray, np.ndarray],
    stay: np.ndarray,
    skip: np.ndarray,
    stop: int,
    stride: int,
    lane: int,
) -> None:
    """The states ``[0, stop)`` of :func:`forward_step` whose sum fell below
    :data:`ctcop.core.logexp.EXACT_BELOW` (a predecessor's term may have been flushed), redone with the
    three-term log-sum-exp. ``frame`` = (below, at_top, emission) as :func:`forward_step` formed
    them. State s of the sample is at ``s * stride + lane`` of every array but ``stay`` (one sample:
    stride 1, lane 0; :mod:`ctcop.core.lanes`: stride LANES, its lane)."""
    below, at_top, emission = frame
    for s in range(stop):
        k = s * stride + lane
        rest = below[k + 2 * stride] * stay[s] + below[k + stride] + below[k] * skip[k]
        if rest + at_top[k + 2 * stride] * stay[s] + at_top[k + stride] + at_top[k] * skip[k] < EXACT_BELOW:
            a0 = alpha[k + 2 * stride] if stay[s] > 0.0 else NEG_INF
            a2 = alpha[k] if skip[k] > 0.0 else NEG_INF
            out[k + 2 * stride] = log_sum3(a0, alpha[k + stride], a2) + emission[k]


@compiled
def forward_step(
    alpha: np.ndarray,
    out: np.ndarray,
    below: np.ndarray,
    at_top: np.ndarray,
    emission: np.ndarray,
    stay: np.ndarray,
    skip: np.ndarray,
    stop: int,
) -> None:
    """Forward variables after one frame, states ``[0, stop)``, into ``out[2:]``.

    ``alpha`` and ``out`` are [S + 2] with two leading -inf pads (state s at index s + 2);
    ``below`` and ``at_top`` [S + 2] are work space (contiguous rows, or LLVM does not vectorise):
    ``exp(alpha - top)`` below the frame's top, and apart the states at the top (whose term is
    exactly 1); ``emission`` [S] the frame's log-probabilities per state.
    """
    top = _frame_top(alpha, 2, stop + 2)
    if top == NEG_INF:
        fill(out, 2, stop + 2, NEG_INF)
        return
    for s in range(stop + 2):
        centred = alpha[s] - top
        below[s] = exp_nonpositive(centred) if centred < 0.0 else 0.0
        at_top[s] = 1.0 if centred == 0.0 else 0.0
    small = 0
    for s in range(stop):
        rest = below[s + 2] * stay[s] + below[s + 1] + below[s] * skip[s]
        units = at_top[s + 2] * stay[s] + at_top[s + 1] + at_top[s] * skip[s]
        small += 1 if rest + units < EXACT_BELOW else 0
        out[s + 2] = top + log_terms(rest, units) + emission[s]
    if small > 0:
        exact_states(alpha, out, (below, at_top, emission), stay, skip, stop, 1, 0)


@compiled
def backward_step(
    ahead: np.ndarray,
    out: np.ndarray,
    scaled: np.ndarray,
    stay: np.ndarray,
    skip: np.ndarray,
    start: int,
    states: int,
) -> None:
    """Backward variables at a frame, states ``[start, S)``, into ``out[:S]``.

    ``ahead`` [S + 2] holds ``beta + emission`` of the next frame with two trailing -inf pads;
    a path in s moves to s (if staying is allowed), s + 1, or s + 2 (if skipping into it is).
    """
    top = _frame_top(ahead, start, states)
    if top == NEG_INF:
        fill(out, start, states, NEG_INF)
        return
    for s in range(start, states + 2):
        scaled[s] = exp_nonpositive(ahead[s] - top)
    small = 0
    for s in range(start, states):
        total = scaled[s] * stay[s] + scaled[s + 1] + scaled[s + 2] * skip[s + 2]
        small += 1 if total < EXACT_BELOW else 0
        out[s] = top + log_normal(total)
    if small > 0:
        for s in range(start, states):
            if scaled[s] * stay[s] + scaled[s + 1] + scaled[s + 2] * skip[s + 2] < EXACT_BELOW:
                a0 = ahead[s] if stay[s] > 0.0 else NEG_INF
                a2 = ahead[s + 2] if skip[s + 2] > 0.0 else NEG_INF
                out[s] = log_sum3(a0, ahead[s + 1], a2)


@compiled
def _emission(row: np.ndarray, top: float, log_sum: float, classes: np.ndarray, out: np.ndarray) -> None:
    """Log-softmax of a frame at each state's class, from :func:`frame_normaliser`'s two values."""
    for s in range(classes.shape[0]):
        out[s] = (np.float64(row[classes[s]]) - top) - log_sum


# -- whole samples --------------------------------------------------------------------------------


@compiled
def frame_row(logits: np.ndarray, batch_major: bool, sample: int, t: int) -> np.ndarray:
    """Frame t of a sample: ``logits`` is [T, N, C], or [N, T, C] when ``batch_major``."""
    row: np.ndarray = logits[sample, t] if batch_major else logits[t, sample]
    return row


@compiled
def forward_pass(
    logits: np.ndarray,
    batch_major: bool,
    sample: int,
    frames: int,
    classes: np.ndarray,
    moves: np.ndarray,
    scratch: np.ndarray,
    work: np.ndarray,
    checkpoints: np.ndarray,
    alphas: np.ndarray,
    normalising: np.ndarray,
) -> float:
    """Log-likelihood of one sample (NaN for a non-finite active logit), keeping one frame's
    forward variables; stores each frame's two normalising values (:func:`frame_normaliser`)
    in ``normalising[:, t]``, the forward variables before frame ``k * segment`` in
    ``checkpoints[k]``, where the segment is ``ceil(frames / len(checkpoints))``, and those after
    each frame of the last segment in ``alphas`` (when it has rows), which the backward sweep
    then need not recompute. ``classes`` and ``moves`` come from :func:`lattice`; ``scratch`` is
    work space of five rows of at least S + 2, ``work`` of C."""
    states = classes.shape[0]
    segment = -(-frames // max(1, checkpoints.shape[0]))
    last_first = (checkpoints.shape[0] - 1) * segment
    alpha, following = scratch[0, : states + 2], scratch[1, : states + 2]
    below, at_top, emission = scratch[2, : states + 2], scratch[3, : states + 2], scratch[4, :states]
    fill(alpha, 0, states + 2, NEG_INF)
    alpha[2] = 0.0  # the virtual start before frame 0 counts as state 0
    fill(following, 0, states + 2, NEG_INF)
    for t in range(frames):
        if t % segment == 0:
            _copy(alpha, checkpoints[t // segment])
        row = frame_row(logits, batch_major, sample, t)
        normalising[0, t], normalising[1, t] = frame_normaliser(row, work)
        if math.isnan(normalising[0, t]):
            return math.nan
        _emission(row, normalising[0, t], normalising[1, t], classes, emission)
        forward_step(alpha, following, below, at_top, emission, moves[0], moves[1], min(states, 2 * t + 2))
        alpha, following = following, alpha
        if alphas.shape[0] > 0 and t >= last_first:
            _copy(alpha, alphas[t - last_first])
    last = float(alpha[states + 1])  # paths ending in state 2L or 2L - 1
    return last if states == 1 else log_sum3(last, float(alpha[states]), NEG_INF)


@compiled
def _gradient_row(
    row: np.ndarray,
    top: float,
    log_sum: float,
    alpha: np.ndarray,
    beta: np.ndarray,
    classes: np.ndarray,
    work: np.ndarray,
    occupancy: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[c] = softmax(row)[c] - sum over states s of class c of occupancy(s)`` for one frame,
    in float64 and rounded once; occupancies ``exp(alpha + beta)`` normalised to sum 1 (every
    aligned path is in exactly one state), which never forms the likelihood itself."""
    n = row.shape[0]
    for c in range(n):
        work[c] = exp_nonpositive((np.float64(row[c]) - top) - log_sum)
    states = classes.shape[0]
    for s in range(states):
        occupancy[s] = alpha[s + 2] + beta[s]
    most = _frame_top(occupancy, 0, states)
    for s in range(states):
        occupancy[s] = exp_nonpositive(occupancy[s] - most)
    total = 0.0
    for s in range(states):
        total += occupancy[s]
    for s in range(states):
        occupancy[s] = occupancy[s] / total  # apart from the scatter below, so that it vectorises
    for s in range(states):
        work[classes[s]] -= occupancy[s]
    for c in range(n):
        out[c] = work[c]


@compiled
def _backward_sweep(
    logits: np.ndarray,
    batch_major: bool,
    sample: int,
    frames: int,
    classes: np.ndarray,
    moves: np.ndarray,
    scratch: np.ndarray,
    work: np.ndarray,
    checkpoints: np.ndarray,
    alphas: np.ndarray,
    normalising: np.ndarray,
    grad: np.ndarray,
) -> None:
    """The gradient of one sample's loss, segment by segment from the last: each segment's
    forward variables (the last one's already in ``alphas``) recomputed from its checkpoint,
    then the backward variables over it from the frame after it, and each frame's row of the
    gradient (:func:`_gradient_row`). ``scratch`` and ``work`` are as for :func:`forward_pass`, with seven rows."""
    states = classes.shape[0]
    segment = alphas.shape[0]
    beta, ahead = scratch[0, : states + 2], scratch[1, : states + 2]
    below, at_top = scratch[2, : states + 2], scratch[3, : states + 2]
    emission, later, occupancy = scratch[4, :states], scratch[5, :states], scratch[6, :states]
    tops, log_sums = normalising[0], normalising[1]
    fill(beta, 0, states + 2, NEG_INF)  # at frame t, states [0, S), two trailing pads
    beta[states - 1] = 0.0
    if states > 1:
        beta[states - 2] = 0.0
    fill(ahead, 0, states + 2, NEG_INF)
    for index in range(checkpoints.shape[0] - 1, -1, -1):
        first = index * segment
        last = min(frames, first + segment)
        alpha = checkpoints[index]
        for t in range(first, last if index < checkpoints.shape[0] - 1 else first):
            _emission(frame_row(logits, batch_major, sample, t), tops[t], log_sums[t], classes, emission)
            fill(alphas[t - first], 0, states + 2, NEG_INF)
            stop = min(states, 2 * t + 2)
            forward_step(alpha, alphas[t - first], below, at_top, emission, moves[0], moves[1], stop)
            alpha = alphas[t - first]
        for t in range(last - 1, first - 1, -1):
            row = frame_row(logits, batch_major, sample, t)
            if t < frames - 1:
                for s in range(states):
                    ahead[s] = beta[s] + later[s]
                start = max(0, states - 2 - 2 * (frames - 1 - t))
                backward_step(ahead, beta, below, moves[0], moves[1], start, states)
            out = frame_row(grad, batch_major, sample, t)
            _gradient_row(row, tops[t], log_sums[t], alphas[t - first], beta, classes, work, occupancy, out)
            _emission(row, tops[t], log_sums[t], classes, later)


@compiled
def block_sizes(lengths: np.ndarray, target_lengths: np.ndarray, first: int, last: int) -> tuple[int, int]:
    """The most frames and the most states (S + 2) of samples ``[first, last)``."""
    frames, labels = 0, 0
    for i in range(first, last):
        frames, labels = max(frames, lengths[i]), max(labels, target_lengths[i])
    return frames, 2 * labels + 3


@compiled
def store_loss(loglik: float, out: np.ndarray, i: int) -> None:
    """``out[i] = -loglik`` in ``out``'s element type, +0.0 where a rounding error would put it
    below 0 (spec 4.3); NaN stays NaN."""
    loss = 0.0 - loglik
    out[i] = 0.0 if loss < 0.0 else loss


@entry
def batch_loss(
    logits: np.ndarray,
    batch_major: bool,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    blank: int,
    merge_repeated: bool,
    first: int,
    last: int,
    out: np.ndarray,
) -> None:
    """The losses (spec 4.3) of samples ``[first, last)``, each alone, into ``out``, rounded once
    to its element type: minus the ln of the summed probability of every aligned path, +0.0 where
    a rounding error would put it below 0, NaN for a non-finite active logit. ``logits`` is
    [T, N, C], or [N, T, C] when ``batch_major``; ``targets[i, :target_lengths[i]]`` is sample i's
    target."""
    most_frames, width = block_sizes(lengths, target_lengths, first, last)
    classes, moves = np.empty(width, dtype=np.int64), np.empty((2, width))
    scratch, work = np.empty((5, width)), np.empty(logits.shape[2])
    checkpoints, normalising = np.empty((1, width)), np.empty((2, most_frames))
    for i in range(first, last):
        states = lattice(targets[i, : target_lengths[i]], blank, merge_repeated, classes, moves)
        loglik = forward_pass(
            logits,
            batch_major,
            i,
            lengths[i],
            classes[:states],
            moves,
            scratch,
            work,
            checkpoints,
            checkpoints[:0],
            normalising,
        )
        store_loss(loglik, out, i)


@compiled
def _segment(frames: int, labels: int, segment_elements: int) -> int:
    """K: the frames between two stored checkpoints of a sample's forward variables,
    ``min(T, max(ceil(sqrt(T)), segment_elements // (S + 2)))`` and at least 1."""
    below = max(frames - 1, 0)
    root = int(math.sqrt(below))  # isqrt(T - 1): the float root, corrected to the integer one
    while root * root > below:
        root -= 1
    while (root + 1) * (root + 1) <= below:
        root += 1
    return max(1, min(max(frames, 1), max(root + 1, segment_elements // (2 * labels + 3))))


@entry
def batch_grad(
    logits: np.ndarray,
    batch_major: bool,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    blank: int,
    merge_repeated: bool,
    segment_elements: int,
    first: int,
    last: int,
    out: np.ndarray,
    grad: np.ndarray,
) -> None:
    """The log-likelihood of each sample (NaN for a non-finite active logit) into ``out``, and
    the gradient of each sample's loss into ``grad`` (same layout as ``logits``, zero on entry):
    NaN in its active frames for a non-finite active logit, left 0 when no path is aligned.
    Sample i's forward variables are stored every :func:`_segment` frames."""
    most_frames, width = block_sizes(lengths, target_lengths, first, last)
    classes, moves = np.empty(width, dtype=np.int64), np.empty((2, width))
    scratch, work = np.empty((7, width)), np.empty(logits.shape[2])
    normalising = np.empty((2, most_frames))
    for i in range(first, last):
        frames = lengths[i]
        states = lattice(targets[i, : target_lengths[i]], blank, merge_repeated, classes, moves)
        count = -(-frames // _segment(frames, target_lengths[i], segment_elements))
        checkpoints = np.empty((count, states + 2))
        alphas = np.empty((-(-frames // max(1, count)), states + 2))
        lattice_classes = classes[:states]
        out[i] = forward_pass(
            logits, batch_major, i, frames, lattice_classes, moves, scratch, work, checkpoints, alphas, normalising
        )
        if math.isnan(out[i]):
            for t in range(frames):
                row = frame_row(grad, batch_major, i, t)
                fill(row, 0, row.shape[0], math.nan)
        elif out[i] > NEG_INF:
            _backward_sweep(
                logits,
                batch_major,
                i,
                frames,
                lattice_classes,
                moves,
                scratch,
                work,
                checkpoints,
                alphas,
                normalising,
                grad,
            )
