"""Framework peers: the CTC losses of PyTorch, TensorFlow (v2 and v1), optax and warp-ctc (through
PaddlePaddle) as conformance runtimes (:mod:`ctcop.conformance.protocol`), each on the part of the
semantics it implements.

``PEERS`` maps a name to its peer; ``peer.available()`` is None when its framework is installed
and the reason otherwise (nothing is imported to find out); ``peer.run(case)`` returns an
:class:`~ctcop.conformance.protocol.Outcome` (loss and d loss / d logits in the case's layout) or
raises :class:`~ctcop.conformance.protocol.Unsupported`. The registry lists them as runtimes, so
``ctcop conformance --runtimes torch,tensorflow,tensorflow-v1,optax,warpctc`` measures them on the
corpus (crash-isolated workers, two runs) and :func:`ctcop.conformance.verdict.judge` judges them like any
runtime: the loss by :func:`ctcop.tolerance.compare`, the gradient by the per-sample gradient rule
of :mod:`ctcop.conformance.verdict`. Importing this package loads numpy only. Every departure
from the spec measured on the corpus is asserted in its framework's
``tests/integration/<framework>/test_peers_<framework>.py`` (both TensorFlow peers in
``tests/integration/tf/test_peers_tf.py``).
"""

from __future__ import annotations

from . import optax_ctc, tf_ctc, torch_ctc, warpctc
from .common import Peer

PEERS: dict[str, Peer] = {
    peer.name: peer for peer in (torch_ctc.PEER, tf_ctc.PEER_V2, tf_ctc.PEER_V1, optax_ctc.PEER, warpctc.PEER)
}

__all__ = ["PEERS", "Peer"]
