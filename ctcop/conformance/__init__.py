"""The conformance wing: cases as data, one adapter per runtime, the crash-isolated runner and
its report (spec section 10 for the comparison rule, 11.4 and 12.2 for the defects it finds).

Holds :mod:`.cases` (the corpus builders), :mod:`.runtimes` (adapters; each imports the onnx,
onnxruntime or openvino wing it needs when first called), :mod:`.runner` (corpus, workers,
``write_corpus``) and :mod:`.report`. May import the core and the two exporter wings; nothing
imports it but the CLI. Importing this package loads numpy only.
"""
