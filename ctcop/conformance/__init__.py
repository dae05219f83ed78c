"""The conformance wing: cases as data, one adapter per runtime, the crash-isolated runner and
its report (spec section 10 for the comparison rule and the registry of known defects).

Modules: :mod:`.suite` (a run from start to end, as ``ctcop conformance`` does it); :mod:`.registry`
(where the runtimes come from); :mod:`.runner` and :mod:`.pool` (every runtime on every case, twice,
in crash-isolated workers); :mod:`.result` (the one result type); :mod:`.verdict` (one evaluation
judged); :mod:`.classes`, :mod:`.expected` (failure classes, expected failures); :mod:`.report`,
:mod:`.junit`, :mod:`.shard` (table, ``--json``, JUnit XML, shards); :mod:`.corpus`, :mod:`.generate`,
:mod:`.groups`, :mod:`.cases`, :mod:`.bruteforce` (the corpus as data, its generator, groups,
builders, and the spec by path enumeration); :mod:`.protocol`, :mod:`.runtimes` (what a runtime
implements, the built-in adapters); :mod:`.writers` (ONNX backend and OpenVINO IR tests);
:mod:`.peers` (the CTC losses of torch, TensorFlow and optax as runtimes).

May import the core and the two exporter wings; nothing imports it but the CLI; importing it loads numpy only.
"""
