"""The compiled core: the forward-backward of spec sections 4 and 5 over a batch, in numba.

- :mod:`.scheduler`: a checked batch cut into blocks of samples, on the calling thread or a pool;
- :mod:`.kernels`: one sample's forward pass and gradient; :mod:`.lanes`: up to 16 samples of one
  shape side by side, so that their loops vectorise;
- :mod:`.rule_scan`: rules 3.1 and 3.3 over a whole time-major batch in one pass;
- :mod:`.logexp`: ``exp`` and ``ln`` in plain arithmetic that vectorises; :mod:`.rounding`: the
  one rounding of a float64 result to the logits' type;
- :mod:`.jit`: numba's two decorators; :mod:`.precompile`: an opt-in warm-up of numba's cache.

The readable numpy form of the same recursion is :mod:`ctcop.forward_backward`.
"""
