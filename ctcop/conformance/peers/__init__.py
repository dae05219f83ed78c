"""Framework peers: the CTC losses of PyTorch, TensorFlow (v2 and v1) and optax as conformance
runtimes (:mod:`ctcop.conformance.protocol`), each on the part of the semantics it implements.

``PEERS`` maps a name to its peer; ``peer.available()`` is None when its framework is installed
and the reason otherwise (nothing is imported to find out); ``peer.run(case)`` returns an
:class:`~ctcop.conformance.protocol.Outcome` (loss and d loss / d logits in the case's layout) or
raises :class:`~ctcop.conformance.protocol.Unsupported`. :func:`.common.judge` compares an answer
with the reference: the loss by :func:`ctcop.tolerance.compare`, the gradient by
:data:`.common.GRAD_UNITS` (a per-sample allowance of 32 eps max(1, |loss|)).
``python -m ctcop.conformance.peers`` measures every installed peer on the corpus, each in a
crash-isolated worker. Importing this package loads numpy only. Every departure from the spec
measured on the corpus is asserted in ``tests/test_peers.py``.
"""

from __future__ import annotations

from . import optax_ctc, tf_ctc, torch_ctc
from .common import GRAD_UNITS, Peer, compare_grad, judge

PEERS: dict[str, Peer] = {peer.name: peer for peer in (torch_ctc.PEER, tf_ctc.PEER_V2, tf_ctc.PEER_V1, optax_ctc.PEER)}

__all__ = ["GRAD_UNITS", "PEERS", "Peer", "compare_grad", "judge"]
