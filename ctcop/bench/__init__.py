"""``ctcop bench``: ctcop's evaluator and exports timed beside the CTC losses of the installed
frameworks, at warp-ctc's shapes and seed 000's batch sweep, in one process with one thread count.

Modules: :mod:`.shapes` (what is timed, and its inputs), :mod:`.threads` (one thread count for
every library), :mod:`.implementations` (the columns), :mod:`.timing` (check, then time, one
cell), :mod:`.memory` (peak memory in a child process), :mod:`.ratios`, :mod:`.results` (the
run's record and its JSON report), :mod:`.table` (the text), :mod:`.plot` (``--plot``) and
:mod:`.run` (the driver). A wing: it imports the ONNX, OpenVINO and conformance wings and, by
name on first use (:mod:`ctcop.process.frameworks`), the frameworks it times.
"""
