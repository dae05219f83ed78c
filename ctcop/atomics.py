"""Atomic reads and writes of int64 array elements, and the CPU's spin-wait hint, for compiled code.

Two threads that hand work to each other through an int64 array (:mod:`ctcop.second_thread`)
read and write its elements with these: a load that later reads cannot move before (acquire), a
store that earlier writes cannot move after (release), a compare-and-swap that one thread only
wins, ``pause``, which tells the CPU that the loop around it is waiting, ``give_way``, which lets
another thread waiting for this one's CPU run first, and ``nap``, a sleep that needs no GIL. numba
offers none of them; each is one LLVM instruction or C call.
"""

from __future__ import annotations

from typing import Any, cast

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


def _element(context: Any, builder: ir.IRBuilder, array_type: Any, array: ir.Value, index: ir.Value) -> ir.Value:
    """The address of ``array[index]`` (a C-contiguous int64 array)."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


def _int64_array(array: Any) -> bool:
    return isinstance(array, types.Array) and array.dtype == types.int64 and array.layout == "C"


def _load(typing_context: Any, array: Any, index: Any) -> Any:
    """``array[index]``, read with acquire ordering."""
    if not (_int64_array(array) and isinstance(index, types.Integer)):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        return builder.load_atomic(_element(context, builder, signature.args[0], *args), "acquire", 8)

    return types.int64(array, index), codegen


def _store(typing_context: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value``, written with release ordering."""
    if not (_int64_array(array) and isinstance(index, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        address = _element(context, builder, signature.args[0], args[0], args[1])
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, address, "release", 8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


def _swap_if(typing_context: Any, array: Any, index: Any, expected: Any, value: Any) -> Any:
    """``array[index] = value`` if it holds ``expected`` (sequentially consistent); whether it did."""
    integers = all(isinstance(v, types.Integer) for v in (index, expected, value))
    if not (_int64_array(array) and integers):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        address = _element(context, builder, signature.args[0], args[0], args[1])
        old = context.cast(builder, args[2], signature.args[2], types.int64)
        new = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(address, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(array, index, expected, value), codegen


def _pause(typing_context: Any) -> Any:
    """The CPU's spin-wait hint (x86 ``pause``; nothing elsewhere)."""

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        if builder.module.triple.startswith(("x86_64", "i386", "i686")):
            hint = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(hint, [])
        return context.get_dummy_value()

    return types.void(), codegen


def _nap(typing_context: Any, microseconds: Any) -> Any:
    """Sleep about ``microseconds`` (the C library's ``usleep``; where the target has none,
    Windows, return at once)."""
    if not isinstance(microseconds, types.Integer):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        if "windows" not in builder.module.triple:
            usleep = ir.FunctionType(ir.IntType(32), [ir.IntType(32)])
            function = builder.module.globals.get("usleep") or ir.Function(builder.module, usleep, "usleep")
            builder.call(function, [builder.trunc(args[0], ir.IntType(32))])
        return context.get_dummy_value()

    return types.void(microseconds), codegen


def _give_way(typing_context: Any) -> Any:
    """Let a thread that waits for this thread's CPU run first, returning at once when none does
    (the C library's ``sched_yield``; where the target has none, Windows, return at once)."""

    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
        if "windows" not in builder.module.triple:
            yielding = ir.FunctionType(ir.IntType(32), [])
            function = builder.module.globals.get("sched_yield") or ir.Function(builder.module, yielding, "sched_yield")
            builder.call(function, [])
        return context.get_dummy_value()

    return types.void(), codegen


load = cast(Any, intrinsic(_load))
store = cast(Any, intrinsic(_store))
swap_if = cast(Any, intrinsic(_swap_if))
pause = cast(Any, intrinsic(_pause))
nap = cast(Any, intrinsic(_nap))
give_way = cast(Any, intrinsic(_give_way))
