"""The layers wing: what the CTCLoss layers in a user's own IR or ONNX file compute (spec 7, 11, 12).

Holds safe loading of untrusted model and input files (:mod:`.files`), finding the layers of the
three forms — OpenVINO's released CTCLoss-4, ctcop's custom IR layer, ctcop's ONNX node —
(:mod:`.find`), static checks against the schema (:mod:`.validate`), the model inputs from an npz
or drawn at random (:mod:`.feeds`), the crash-isolated worker that runs the runtime
(:mod:`.worker`), the reference against it with verdicts and likely causes (:mod:`.evaluate`),
and the table and JSON (:mod:`.report`). Used by ``ctcop eval`` and ``ctcop validate``. May
import the core, onnx and openvino (each only for the files of its kind).
"""
