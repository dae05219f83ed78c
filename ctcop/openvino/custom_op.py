"""The spec's CTCLoss-4 as one OpenVINO operation evaluated by ctcop's reference (spec 12.3).

In IR it is a layer of type ``CTCLoss``, version ``ctcop1``, with the time-major inputs
(``inputs``, ``sequence_mask``, ``labels``) and the two boolean attributes. OpenVINO runs it on the
CPU device through :meth:`CTCLossOp.evaluate`, which calls :func:`ctcop.ctc_loss_or_nan`: like
every graph ctcop exports it is a total function (spec 11.5), so input that breaks a rule gives
NaN for the samples that break it (every sample for shapes that disagree or C = 0) instead of
failing inference. It computes on what the plugin hands it: the CPU plugin narrows int64, uint64
and uint32 mask and labels to int32 by wrapping before any op sees them (spec 12.2 D6), so there
a label 2**32 reaches the op as 0.
"""

from __future__ import annotations

from typing import Any

import openvino as ov

from ..attributes import Attributes
from ..reference import ctc_loss_or_nan
from ..schema import encoding

try:
    from openvino import DiscreteTypeInfo
except ImportError:  # pragma: no cover - older layouts of the openvino package
    from openvino.runtime import DiscreteTypeInfo

OPSET_VERSION: str = encoding("openvino_custom")["version"]
LAYER_TYPE: str = encoding("openvino_custom")["type"]


def _flag(value: Any) -> bool:
    """A boolean attribute as it arrives from Python (bool) or from IR text ("true"/"false")."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


class CTCLossOp(ov.Op):  # type: ignore[misc]
    """OpenVINO operation ``CTCLoss`` (version ``ctcop1``): the spec's time-major CTCLoss-4."""

    class_type_info = DiscreteTypeInfo(LAYER_TYPE, OPSET_VERSION)

    def __init__(self, inputs: list[ov.Output] | None = None, attributes: Attributes | None = None) -> None:
        super().__init__(self)
        self._attributes: dict[str, Any] = dict(attributes or Attributes.of())
        if inputs is not None:
            self.set_arguments(inputs)
            self.constructor_validate_and_infer_types()

    def get_type_info(self) -> Any:
        return CTCLossOp.class_type_info

    def attributes(self) -> Attributes:
        return Attributes.of({name: _flag(value) for name, value in self._attributes.items()})

    def validate_and_infer_types(self) -> None:
        batch = self.get_input_partial_shape(0)
        n = batch[1] if batch.rank.is_static and batch.rank.get_length() == 3 else ov.Dimension()
        self.set_output_type(0, self.get_input_element_type(0), ov.PartialShape([n]))

    def clone_with_new_inputs(self, new_inputs: list[ov.Output]) -> CTCLossOp:
        return CTCLossOp(new_inputs, self.attributes())

    def visit_attributes(self, visitor: Any) -> bool:
        visitor.on_attributes(self._attributes)
        return True

    def has_evaluate(self) -> bool:
        return True

    def evaluate(self, outputs: list[ov.Tensor], inputs: list[ov.Tensor]) -> bool:
        loss = ctc_loss_or_nan(inputs[0].data, inputs[1].data, inputs[2].data, **self.attributes())
        outputs[0].shape = loss.shape
        outputs[0].data[...] = loss
        return True
