"""Brute-force oracles: the spec read literally, by enumerating every path.

The enumeration lives in :mod:`ctcop.conformance.bruteforce` (the corpus generator verifies small
cases with it); this module re-exports it for the tests. Exponential in T by design; only for
small cases. Independent of ctcop's recursion and validation.
"""

from ctcop.conformance.bruteforce import (
    PATH_LIMIT,
    collapse,
    decode_path,
    first_occurrences,
    openvino_loss,
    openvino_loss_grad,
    path_sum,
    path_sum_loss,
    time_major_loss,
    time_major_loss_grad,
)

__all__ = [
    "PATH_LIMIT",
    "collapse",
    "decode_path",
    "first_occurrences",
    "openvino_loss",
    "openvino_loss_grad",
    "path_sum",
    "path_sum_loss",
    "time_major_loss",
    "time_major_loss_grad",
]
