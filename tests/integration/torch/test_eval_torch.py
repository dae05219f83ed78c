"""``ctcop eval`` of a converted PyTorch model: ctcop's lowering of ``F.ctc_loss`` in what
``openvino.convert_model`` gives is read back as the layer it computes, on the values that enter
it (spec 13; the other lowerings: tests/unit/test_eval_stages.py)."""

import numpy as np
import openvino
import pytest
from support.eval_stages import C, N, T, evaluated

import ctcop

torch = pytest.importorskip("torch")


def test_eval_of_a_converted_torch_model_judges_its_ctc_stage(tmp_path, capsys) -> None:
    class Acoustic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(4, C, 3, padding=1)

        def forward(self, x, targets, input_lengths, target_lengths):
            log_probs = self.conv(x).permute(2, 0, 1).log_softmax(2)
            return torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="none")

    torch.manual_seed(0)
    example = (torch.randn(N, 4, T), torch.tensor([[1, 2, 3], [1, 1, 2], [2, 3, 4]]), torch.tensor([8, 8, 2]))
    example += (torch.tensor([3, 2, 3]),)
    model = Acoustic()
    converted = openvino.convert_model(model, example_input=example, extension=ctcop.openvino_extensions())
    path = str(tmp_path / "torch.xml")
    openvino.save_model(converted, path, compress_to_fp16=False)
    inputs = {i.get_any_name(): a.numpy() for i, a in zip(converted.inputs, example, strict=True)}
    code, (layer,) = evaluated(capsys, tmp_path, path, inputs)
    assert (layer["form"], layer["verdict"], code) == ("lowered", "agree", 0)
    # The stage is the time-major op on what PyTorch's conversion feeds it (blank moved last, the
    # renormalisation corrected after it, spec 14); sample 2, 3 labels in 2 frames, is infeasible.
    assert layer["runtime"][2] == "inf" and np.isinf(model(*example).detach().numpy()[2])
