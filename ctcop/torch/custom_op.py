"""``ctcop::ctc_loss``: PyTorch's ctc_loss as a torch.library custom op that torch.export keeps.

``torch.export`` cannot trace ``ctc_loss``: it is a composite of ``aten._ctc_loss``, whose second
output (the alpha table, [N, T, 2 max L + 1]) has a shape that depends on the values of
``target_lengths``, and fake tensors refuse it (``DynamicOutputShapeException:
aten._ctc_loss.Tensor``). The custom op (:func:`ctc_loss_op`) has the same arguments as
``aten::ctc_loss.Tensor`` and a fake implementation whose shape depends on shapes only, so the
exported program holds it as one node; eagerly it *is* PyTorch's op (forward by ``aten::ctc_loss``,
backward by autograd through it), so training with it is training with PyTorch's loss.

A model reaches it three ways: :func:`ctc_loss` and :class:`CTCLoss` (drop-in replacements for
``F.ctc_loss`` and ``nn.CTCLoss``), or :class:`redirect_ctc_loss`, a TorchFunctionMode under which
PyTorch's own ``F.ctc_loss``, ``torch.ctc_loss`` and ``nn.CTCLoss`` become calls of the custom op
(``ctcop.torch.export_onnx`` enters it; it also guards Hugging Face's label check, spec 14.3).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental import symbolic_shapes
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.overrides import TorchFunctionMode

from .semantics import REDUCTIONS, ArgumentFacts, TorchCtcCall, checked_call

OP_NAME = "ctcop::ctc_loss"


@torch.library.custom_op(OP_NAME, mutates_args=())
def ctc_loss_op(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int,
    reduction: int,
    zero_infinity: bool,
) -> torch.Tensor:
    """PyTorch's ``aten::ctc_loss.Tensor`` (``reduction`` as PyTorch's enum: none 0, mean 1, sum 2)."""
    loss: torch.Tensor = torch.ops.aten.ctc_loss.Tensor(
        log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity
    )
    return loss.clone()


@ctc_loss_op.register_fake
def _fake(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int,
    reduction: int,
    zero_infinity: bool,
) -> torch.Tensor:
    """The op's output from shapes only: [N], or [] when reduced or unbatched."""
    shape = log_probs.shape[1:2] if reduction == 0 and log_probs.dim() == 3 else ()
    return log_probs.new_empty(shape)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    log_probs, targets, input_lengths, target_lengths, *static = inputs
    ctx.save_for_backward(log_probs, targets, input_lengths, target_lengths)
    ctx.static = tuple(static)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    """The gradient of PyTorch's own op, by autograd through it on the saved inputs."""
    log_probs, targets, input_lengths, target_lengths = ctx.saved_tensors
    with torch.enable_grad():
        leaf = log_probs.detach().requires_grad_(True)
        loss = torch.ops.aten.ctc_loss.Tensor(leaf, targets, input_lengths, target_lengths, *ctx.static)
        (gradient,) = torch.autograd.grad(loss, leaf, grad)
    return gradient, None, None, None, None, None, None


ctc_loss_op.register_autograd(_backward, setup_context=_setup_context)


def _type_name(value: torch.Tensor) -> str:
    return str(value.dtype).removeprefix("torch.")


def _facts(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> ArgumentFacts:
    """What the call's arguments say statically (lists are reported, not read)."""
    lengths = (input_lengths, target_lengths)
    lists = tuple(isinstance(v, (list, tuple)) for v in lengths)
    ranks = tuple(None if isinstance(v, (list, tuple)) else int(v.dim()) for v in (log_probs, targets, *lengths))
    classes = log_probs.shape[-1] if log_probs.dim() in (2, 3) else None
    types = tuple("int64" if is_list else _type_name(v) for v, is_list in zip(lengths, lists, strict=True))
    return ArgumentFacts(ranks, _type_name(log_probs), types, classes if isinstance(classes, int) else None, lists)


def checked(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: Any,
    reduction: Any,
    zero_infinity: Any,
) -> TorchCtcCall:
    """The static arguments of a call with these values (an InvalidInputError names a bad one)."""
    return checked_call(blank, reduction, zero_infinity, _facts(log_probs, targets, input_lengths, target_lengths))


def _tracing() -> bool:
    tracing = torch._C._get_tracing_state() is not None
    return bool(tracing or torch.compiler.is_compiling() or torch.compiler.is_exporting())


def ctc_loss(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor | Sequence[int],
    target_lengths: torch.Tensor | Sequence[int],
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> torch.Tensor:
    """``torch.nn.functional.ctc_loss``, computed by PyTorch, exportable by ctcop. Lengths given
    as lists of ints are made tensors when run eagerly and refused while tracing or exporting
    (the graph would hold them as constants)."""
    if not _tracing():
        input_lengths, target_lengths = (
            torch.as_tensor(v, dtype=torch.long) if isinstance(v, (list, tuple)) else v
            for v in (input_lengths, target_lengths)
        )
    call = checked(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)
    loss: torch.Tensor = ctc_loss_op(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        call.blank,
        REDUCTIONS.index(call.reduction),
        call.zero_infinity,
    )
    return loss


class CTCLoss(torch.nn.CTCLoss):
    """``torch.nn.CTCLoss`` (same arguments, same values and gradients) through :func:`ctc_loss`."""

    def forward(
        self, log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor, target_lengths: torch.Tensor
    ) -> torch.Tensor:
        return ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction, self.zero_infinity
        )


_FUNCTIONAL = inspect.signature(F.ctc_loss)
_NATIVE_DEFAULTS = {"blank": 0, "reduction": 1, "zero_infinity": False}


def _bound(func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a call of ``F.ctc_loss`` or ``torch.ctc_loss`` by name, defaults filled."""
    if func is F.ctc_loss:
        bound = _FUNCTIONAL.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)
    names = ("log_probs", "targets", "input_lengths", "target_lengths", *_NATIVE_DEFAULTS)
    return {**_NATIVE_DEFAULTS, **dict(zip(names, args, strict=False)), **kwargs}


class redirect_ctc_loss(TorchFunctionMode):
    """Under this mode, calls of ``F.ctc_loss``, ``torch.ctc_loss`` (and so ``nn.CTCLoss``) are
    checked (:func:`checked`) and become calls of ``ctcop::ctc_loss``.

    While torch.export traces, a Python ``if`` on tensor values that torch cannot decide
    (``GuardOnDataDependentSymNode``: Hugging Face's ``if labels.max() >= vocab_size: raise``) is
    traced as not taken, and every loss the mode makes after it is NaN wherever the condition
    holds: the values for which the model would take the other branch (there: raise) get NaN,
    as spec 14.3 gives NaN where PyTorch raises. Outputs other than the losses carry no such
    check. The mode's own frames are hidden from torch's reports of errors it did not cause
    (:func:`hidden_frames`)."""

    def __init__(self) -> None:
        super().__init__()
        self._untaken: list[torch.Tensor] = []

    def __enter__(self) -> redirect_ctc_loss:
        self._untaken = []
        _unreported_in_torch()
        super().__enter__()  # type: ignore[no-untyped-call]  # torch leaves it untyped
        return self

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        if func is F.ctc_loss or func is torch.ctc_loss:
            return self._loss(_bound(func, args, kwargs or {}))
        if func is torch.Tensor.__bool__ and torch.compiler.is_exporting():
            return self._truth(args[0])
        return func(*args, **(kwargs or {}))

    def _loss(self, a: Mapping[str, Any]) -> torch.Tensor:
        values = (a["log_probs"], a["targets"], a["input_lengths"], a["target_lengths"])
        call = checked(*values, a["blank"], a["reduction"], a["zero_infinity"])
        loss: torch.Tensor = ctc_loss_op(*values, call.blank, REDUCTIONS.index(call.reduction), call.zero_infinity)
        if self._untaken:
            taken = torch.stack([condition.reshape(()).bool() for condition in self._untaken]).any()
            loss = loss.masked_fill(taken, float("nan"))
        return loss

    def _truth(self, condition: torch.Tensor) -> bool:
        """``bool(condition)``, or False (remembered for :meth:`_loss`) where torch.export
        cannot decide it."""
        try:
            return bool(condition)
        except GuardOnDataDependentSymNode:
            self._untaken.append(condition)
            return False


def _unreported_in_torch() -> None:
    """Names this file among those torch's symbolic shapes skip when they name the user's line in
    a report ("Caused by: ..."), so an error raised under the mode names the model's line."""
    files = getattr(symbolic_shapes, "uninteresting_files", None)
    if files is not None:
        files().add(__file__)


def hidden_frames(error: BaseException) -> BaseException:
    """``error`` (and its causes and contexts) with this mode's frames taken out of its
    traceback: the mode only passes through calls it does not redirect."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        entries = []
        tb = current.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is not redirect_ctc_loss.__torch_function__.__code__:
                entries.append(tb)
            tb = tb.tb_next
        for outer, inner in zip(entries, [*entries[1:], None], strict=True):
            outer.tb_next = inner
        current.__traceback__ = entries[0] if entries else None
        current = current.__cause__ or current.__context__
    return error
