"""The stand-in for the gradient output of TensorFlow's ``CTCLoss`` op (spec section 15).

The conversion rule builds the loss only. Its second output is :class:`GradientRefused`, an
operation that passes validation while nothing reads it (the frontend then prunes it) and fails
it, with :data:`GRADIENT_REFUSED`, once a node consumes it: a graph that reads the gradient (a
training step) is refused at conversion with that message, never converted into a model that
computes something else. Imports openvino.
"""

from __future__ import annotations

from typing import Any

import openvino as ov
from openvino import DiscreteTypeInfo

GRADIENT_REFUSED = (
    "ctcop converts the loss of TensorFlow's CTCLoss op, not its gradient output, which this graph "
    "reads (a training step): convert the inference graph, or take gradients in TensorFlow"
)


class GradientRefused(ov.Op):  # type: ignore[misc]
    """Output 1 of a converted ``CTCLoss``: the logits' shape and type; invalid once consumed."""

    class_type_info = DiscreteTypeInfo("CTCLossGradientRefused", "ctcop_tf")

    def __init__(self, inputs: list[ov.Output] | None = None) -> None:
        super().__init__(self)
        if inputs is not None:
            self.set_arguments(inputs)
            self.constructor_validate_and_infer_types()

    def get_type_info(self) -> Any:
        return GradientRefused.class_type_info

    def validate_and_infer_types(self) -> None:
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))
        if self.output(0).get_target_inputs():
            raise RuntimeError(GRADIENT_REFUSED)

    def clone_with_new_inputs(self, new_inputs: list[ov.Output]) -> GradientRefused:
        return GradientRefused(new_inputs)

    def visit_attributes(self, visitor: Any) -> bool:
        return True
