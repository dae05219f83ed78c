"""The conformance wing: cases as data, one adapter per runtime, the crash-isolated runner and
its report (spec section 10 for the comparison rule and the registry of known defects).

Modules:

- :mod:`.suite`: a run from start to end, as ``ctcop conformance`` does it (also ``write_corpus``);
- :mod:`.registry`: where the runtimes come from (built-in adapters, the framework peers,
  ``--runtime-module`` plug-ins);
- :mod:`.runner`: every runtime on every case, twice, and the combination of the two runs;
  :mod:`.pool`: the crash-isolated worker processes that run them;
- :mod:`.result`: the one result type (:class:`~.result.Result`) and its JSON;
- :mod:`.verdict`: one evaluation judged (the loss by spec 10, the per-sample gradient rule, the
  rejection rule);
- :mod:`.classes`: the failure classes; :mod:`.expected`: expected failures;
- :mod:`.report`: the table, the ``--json`` document and the environment; :mod:`.junit`: JUnit
  XML; :mod:`.shard`: ``--shard K/N`` and the merge of shard reports;
- :mod:`.corpus`: the corpus as data (folders of ``.npy`` and a manifest); :mod:`.generate`: its
  generator; :mod:`.groups`: the case groups; :mod:`.cases`: the case builders;
  :mod:`.bruteforce`: the spec by path enumeration, an independent check of the expected values;
- :mod:`.protocol`: what a runtime implements; :mod:`.runtimes`: the built-in adapters (each
  imports the onnx, onnxruntime or openvino wing it needs when first called);
- :mod:`.writers`: cases as ONNX backend tests and OpenVINO IR tests;
- :mod:`.peers`: the CTC losses of torch, TensorFlow (v2, v1) and optax as runtimes.

May import the core and the two exporter wings; nothing imports it but the CLI. Importing this
package loads numpy only.
"""
