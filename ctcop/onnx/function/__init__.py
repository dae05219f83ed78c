"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes in log space, in its compute type (float64 for float64 models, float32 otherwise), what
the reference computes. It is a total function (spec 11.5): it returns a loss for every input of
its declared ranks and element types. Its stages, in the order the graph runs them:

* :mod:`.lattice`: checks (3.1, 3.3, 11.5), targets (3.3, 3.4), lanes, lattice (4.5) and steps;
* :mod:`.emissions`: the log-softmax of the frames read (3.2, 4.1, 4.4), one of three ways by C;
* :mod:`.recursion`: the forward Loop (4.5), blocks of UNROLL steps;
* :mod:`.loss`: the join of each sample's two lanes and the read-out (4.3, 4.4, 11.5), and
  :func:`ctc_loss_function`, which builds the function from the stages.

:mod:`.rows` holds the helpers on [N, W] rows the stages share, :mod:`.constants` the names and sizes.
"""

from .constants import CHUNK, DOMAIN, DOMAIN_VERSION, FEW_CLASSES, MIN_OPSET, OP_TYPE, UNROLL
from .loss import ctc_loss_function

__all__ = ["CHUNK", "DOMAIN", "DOMAIN_VERSION", "FEW_CLASSES", "MIN_OPSET", "OP_TYPE", "UNROLL", "ctc_loss_function"]
