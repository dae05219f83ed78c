"""PyTorch: ``torch.nn.functional.ctc_loss`` on the CPU, as a training loop calls it.

``log_softmax`` of the logits over the classes in the logits' own element type (float32 stays
float32, float64 stays float64), then ``ctc_loss(log_probs [T, N, C], targets [N, S] padded,
input_lengths, target_lengths, blank, reduction="none", zero_infinity=False)``; the gradient is
``autograd`` of the sum of the losses with respect to the case's logits tensor (the released
form's [N, T, C] is transposed inside the graph, so the gradient comes back in the case's layout).
Any blank index. Unsupported: float16 and bfloat16 (the CPU kernel is implemented for float and
double only), ``preprocess_collapse_repeated``, ``merge_repeated=false``, ``unique``.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ...process.frameworks import framework
from ..protocol import Outcome
from .common import DEFAULT_ATTRIBUTES, THREADS, Peer, blank, dense_targets, frame_lengths, logits

if TYPE_CHECKING:
    from ..case import Case


@cache
def torch() -> Any:
    module = framework("torch")
    module.set_num_threads(THREADS)
    return module


def tensor(array: np.ndarray) -> Any:
    """A tensor of its own over a copy of ``array`` (the case's arrays are read-only)."""
    return torch().from_numpy(np.array(array, order="C", copy=True))


class TorchPeer(Peer):
    def load(self) -> None:
        torch()

    def compute(self, case: Case) -> Outcome:
        t = torch()
        x = logits(case)
        leaf = tensor(x).requires_grad_(x.dtype.kind == "f")
        log_probs = t.log_softmax(leaf if case.form == "spec" else leaf.transpose(0, 1), dim=2)
        targets, target_lengths = dense_targets(case)
        loss = t.nn.functional.ctc_loss(
            log_probs,
            tensor(targets),
            tensor(frame_lengths(case)),
            tensor(target_lengths),
            blank=blank(case),
            reduction="none",
            zero_infinity=False,
        )
        loss.sum().backward()
        return Outcome(loss.detach().numpy(), leaf.grad.numpy())


PEER = TorchPeer(
    name="torch",
    description="torch.nn.functional.ctc_loss (CPU) on log_softmax of the logits in their dtype, autograd",
    modules=("torch",),
    dtypes=frozenset({"float32", "float64"}),
    attributes=DEFAULT_ATTRIBUTES,
)
