"""A row of a conformance report: a runtime, the OpenVINO device it compiles for and the precision
it computes and is judged at (spec 10.4).

A row's name is its runtime's, then ``~LABEL`` for a runtime of another Python environment
(``--runtime-python LABEL=PYTHON``), then ``@DEVICE`` for an OpenVINO runtime on a device other
than ``CPU``, then ``/PRECISION`` for a precision other than ``declared``: ``openvino-ir``,
``openvino-ir@AUTO:CPU``, ``openvino~ov2025@GPU.1/f16``, ``onnxruntime/bf16``. Runtime names and
labels hold none of ``~@/`` (:data:`NAME`), so a name parses back into its row (:data:`ROW`
matches it). The environment is not part of a registry key: a release measured in another
environment is held to the same entries (its departures are news, or a regression).

The registry of known defects speaks of rows by their *registry key*: the runtime, then
``@DEVICE`` for the hardware device the compiled model executes on (``AUTO:CPU`` and
``HETERO:CPU`` execute on ``CPU``, read back from OpenVINO), then ``/PRECISION`` as in the name.
A row's defects are those listed under its key and, for a reduced precision, those listed under
the key without it: what a device gets wrong at its declared precision it gets wrong at any.
An entry measured on ``CPU`` never covers ``GPU``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # a runtime's name
DEFAULT_DEVICE = "CPU"
DECLARED = "declared"
# ``declared``: the logits' own type where the device computes it (spec 13); ``native``: the
# device's default; the others: OpenVINO's INFERENCE_PRECISION_HINT as given.
PRECISIONS = (DECLARED, "native", "f32", "bf16", "f16")
REDUCED = ("bf16", "f16")  # computed in a type narrower than float32: judged by spec 10.5's bound
DEVICE = re.compile(r"[A-Za-z0-9_.:,()-]{1,128}")  # an OpenVINO device's name, as ctcop takes it
LABEL = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")  # a Python environment's label
ROW = re.compile(  # a row's name
    rf"(?:{NAME.pattern})(?:~{LABEL.pattern})?(?:@{DEVICE.pattern})?(?:/(?:{'|'.join(PRECISIONS[1:])}))?"
)


@dataclass(frozen=True)
class Row:
    """``runtime`` (a runtime's name) on ``device`` at ``precision``, in the Python environment
    labelled ``environment`` ("": ctcop's own)."""

    runtime: str
    device: str = DEFAULT_DEVICE
    precision: str = DECLARED
    environment: str = ""

    @property
    def name(self) -> str:
        environment = f"~{self.environment}" if self.environment else ""
        device = "" if self.device == DEFAULT_DEVICE else f"@{self.device}"
        precision = "" if self.precision == DECLARED else f"/{self.precision}"
        return f"{self.runtime}{environment}{device}{precision}"

    def registry_keys(self, executes_on: str = DEFAULT_DEVICE) -> tuple[str, ...]:
        """The registry keys of this row (module docstring), its own first, when its model
        executes on ``executes_on``."""
        device = Row(self.runtime, executes_on).name  # the environment is not part of a key
        return (f"{device}/{self.precision}", device) if self.precision != DECLARED else (device,)


def parse(name: str) -> Row:
    """The row a name names (:attr:`Row.name` read back)."""
    rest, slash, precision = name.rpartition("/") if "/" in name else (name, "", DECLARED)
    head, at, device = rest.partition("@")
    runtime, _, environment = head.partition("~")
    return Row(runtime, device if at else DEFAULT_DEVICE, precision if slash else DECLARED, environment)
