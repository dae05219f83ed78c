"""The ``ctcop`` command line.

Error policy: every refusal, argparse's usage errors included, is exactly one line on stderr and
exit code 2, before any work is done: output paths are checked first (not empty, not a directory
or other non-regular file, in an existing folder that a file can be created in), then input files
(regular files within the size limits), numbers (ASCII digits within bounds) and names; an option
that the chosen command would ignore is refused. A bug of ctcop is one line ``internal error``
and exit 3. SIGINT and SIGTERM end the command with one line on stderr and exit 130 / 143;
``conformance`` and ``eval`` first write a JSON report of what finished, marked incomplete. Every
JSON report is written atomically (a temporary file in the same folder, then renamed).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

from . import __version__
from .attributes import Attributes
from .errors import InvalidInputError
from .examples import worked_examples
from .options import atomic_output, checked_input_file
from .reference import ctc_loss
from .schema import form
from .text import one_line, printable

EXIT_USAGE = 2
EXIT_INTERNAL = 3
MAX_SEED = 2**32 - 1
MAX_DETAILS = 1_000_000
_DIGITS = re.compile(r"[0-9]{1,30}")
_NUMBER = re.compile(r"-?[0-9]{1,30}")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_DEVICE = re.compile(r"[A-Za-z0-9_.:,()-]{1,128}")
_RUNTIME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SECONDS = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
MAX_JOBS = 1024
MAX_TIMEOUT_S = 86400


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``report`` is the partial report written, if any."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.report: str | None = None
        self.finished = False  # the command's work was done (the report complete) when it came


_RECEIVED: list[int] = []  # the signal that interrupted this run, once one has


def _on_signal(signum: int, _: FrameType | None) -> None:
    # Later signals are ignored: the command is already stopping its workers and writing its report.
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)
    _RECEIVED.append(signum)
    raise Interrupted(signum)


def interruption(error: BaseException) -> Interrupted | None:
    """The interruption behind ``error``: itself, or the signal received when a library turned the
    exception raised in its callback into its own (OpenVINO wraps it in a RuntimeError, which
    ctcop may have turned into an InvalidInputError); None when there was no signal."""
    if isinstance(error, Interrupted):
        return error
    return Interrupted(_RECEIVED[0]) if _RECEIVED else None


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors as one line (no usage block), exit 2; ``--help`` is unchanged."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ctcop: invalid usage: {self.prog}: {_one_line(message)} (see {self.prog} --help)\n")


def _one_line(text: str) -> str:
    return one_line(text, 4000)


def _first_line(text: str) -> str:
    return printable(next((line.strip() for line in text.splitlines() if line.strip()), ""))


def _show(*lines: str) -> None:
    """Print each of ``lines`` as one line, names from users' files made printable (a newline or
    an escape sequence in a name is escaped, :mod:`ctcop.text`)."""
    print("\n".join(printable(line) for line in lines))


# Strict argument types: ASCII digits within bounds, names without control characters.


def _integer(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in [{low}, {high}] (ASCII digits)")
        return int(text)

    return parse


def _pattern(what: str, pattern: re.Pattern[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not pattern.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {what}")
        return text

    return parse


def _text(what: str) -> Callable[[str], str]:
    """A non-empty name or glob of printable characters, at most 4096 of them."""

    def parse(text: str) -> str:
        if not text or len(text) > 4096 or not text.isprintable():
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {what} (non-empty, printable)")
        return text

    return parse


def _runtime_names(text: str) -> list[str]:
    names = text.split(",")
    if not all(_RUNTIME.fullmatch(name) for name in names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of runtime names")
    return names


def _dims(text: str) -> tuple[int | str, ...]:
    """``T,N,C``: each an integer (ASCII digits; bounds checked by the exporter options) or an ASCII name."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 3:
        raise InvalidInputError("dims", f"{text!r} must give T,N,C (three comma-separated values)")
    dims: list[int | str] = []
    for symbol, part in zip("TNC", parts, strict=True):
        if _NUMBER.fullmatch(part):
            dims.append(int(part))
        elif _SYMBOL.fullmatch(part):
            dims.append(part)
        else:
            raise InvalidInputError("dims", f"{symbol} = {part!r} is neither a number (ASCII digits) nor a name")
    return tuple(dims)


# Output paths and reports.


def _refuse(what: str, rule: str) -> NoReturn:
    raise InvalidInputError(what, rule)


def _probe_folder(folder: str, what: str) -> None:
    """Refuse unless a file can be created in ``folder`` (tried, not guessed: root passes access checks)."""
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".ctcop-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        _refuse(what, f"cannot create a file in {folder!r}: {error.strerror}")


def checked_output(path: str, what: str, suffix: str = "") -> None:
    """Refuse an output path ctcop could not write, before any work: empty, a directory or other
    non-regular file, in a missing or unwritable folder, or without the required ``suffix``."""
    if not path or "\0" in path:
        _refuse(what, f"{path!r} is not a file path")
    if suffix and not path.endswith(suffix):
        _refuse(what, f"{path!r} must end in {suffix}")
    others = [path[: -len(suffix)] + ".bin"] if suffix == ".xml" else []
    for target in (path, *others):
        if os.path.isdir(target):
            _refuse(what, f"{target!r} is a directory")
        if os.path.lexists(target) and not os.path.isfile(target):
            _refuse(what, f"{target!r} exists and is not a regular file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        _refuse(what, f"the folder of {path!r} does not exist")
    _probe_folder(folder, what)


def checked_output_folder(path: str, what: str) -> None:
    """Refuse a folder ctcop could not create or write files in."""
    if not path or "\0" in path:
        _refuse(what, f"{path!r} is not a folder path")
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        _refuse(what, f"{existing!r} exists and is not a folder")
    _probe_folder(existing, what)


def write_atomically(path: str, text: str, what: str = "json") -> None:
    """Write ``text`` to ``path`` by way of a temporary file in its folder and a rename, so that a
    reader (or an interruption) never sees half a report."""
    try:
        with atomic_output(path) as temporary, open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        _refuse(what, f"cannot write {path!r}: {error.strerror or error}")


def _refuse_ignored(args: argparse.Namespace, options: Sequence[str], why: str) -> None:
    """Refuse each of ``options`` that was given: the command would ignore it ``why``."""
    for option in options:
        if getattr(args, option) not in (None, False):
            raise InvalidInputError(option, f"--{option.replace('_', '-')} is ignored {why}: leave it out")


# Commands.


def _example(_: argparse.Namespace) -> int:
    """Evaluate the worked examples of spec/ctcloss4.md section 9 and print them."""
    for example in worked_examples():
        loss = ctc_loss(example.inputs, example.sequence_mask, example.labels, **example.attributes)
        print(f"spec {example.section} {example.name} [{example.attributes.label()}]:")
        print(f"  ctcop loss {loss[0]:.16g}   by hand {example.closed_form} = {example.expected:.16g}")
    return 0


def _attributes(args: argparse.Namespace) -> Attributes:
    return Attributes.of({name: getattr(args, name) for name in form("time_major").attributes})


def _export_options(args: argparse.Namespace) -> dict[str, Any]:
    """The exporter's keyword arguments, after refusing what this combination would ignore."""
    checked_output(args.output, "output", ".xml" if args.format == "ir" else "")
    if args.format == "onnx":
        _refuse_ignored(args, ["form"], "with --format onnx (it chooses between IR forms)")
    else:
        _refuse_ignored(args, ["opset"], "with --format ir (it is the ONNX opset)")
    if args.attach:
        _refuse_ignored(args, ["dtype", "dims"], "with --attach: it comes from the model's logits output")
        checked_input_file(args.attach, "model")
        for output in [args.output, *([args.output[:-4] + ".bin"] if args.format == "ir" else [])]:
            _refuse_overwriting_inputs(output, "output", _model_files(args.attach))
    else:
        _refuse_ignored(args, ["logits_output"], "without --attach")
    common: dict[str, Any] = {
        "mask_dtype": args.mask_dtype,
        "labels_dtype": args.labels_dtype,
        "attributes": _attributes(args),
    }
    if not args.attach:
        common |= {"dtype": args.dtype or "float32", "dims": _dims(args.dims or "T,N,C")}
    return common


def _export(args: argparse.Namespace) -> int:
    """Write the op, or a model with the op attached, as ONNX or OpenVINO IR."""
    common = _export_options(args)
    logits = args.logits_output or "logits"
    if args.format == "onnx":
        from . import onnx as wing

        opset = wing.MIN_OPSET if args.opset is None else args.opset
        if args.attach:
            model = wing.attach_onnx(wing.load_onnx(args.attach), logits, opset=opset, **common)
        else:
            model = wing.onnx_model(opset=opset, **common)
        wing.save_onnx(model, args.output)
    else:
        from . import openvino as ov_wing

        ir_form = args.form or "lowered"
        if args.attach:
            model = ov_wing.attach_openvino(ov_wing.load_ir(args.attach), logits, form=ir_form, **common)
        else:
            model = ov_wing.ir_model(form=ir_form, **common)
        ov_wing.save_ir(model, args.output)
    _show(f"wrote {args.output}")
    return 0


_WRITERS = ("write_corpus", "write_onnx_tests", "write_ir_tests")
_RUN_ONLY = [
    "runtimes", "runtime_module", "jobs", "timeout", "json", "junit", "expected_failures", "no_known_defects",
    "details", "strict",
]  # fmt: skip


def _writing(args: argparse.Namespace) -> str | None:
    return next((name for name in _WRITERS if getattr(args, name) is not None), None)


def _conformance_checked(args: argparse.Namespace) -> list[Any]:
    """Refuse what cannot work before any: output paths, then input files, then options the
    command would ignore. The expected failures, read."""
    writer = _writing(args)
    if writer is not None:
        flag = "--" + writer.replace("_", "-")
        _refuse_ignored(args, _RUN_ONLY, f"with {flag} (it writes cases, it runs nothing)")
        checked_output_folder(getattr(args, writer), writer)
        target = getattr(args, writer)
        if os.path.isdir(target) and os.listdir(target):
            _refuse(writer, f"{target!r} is not empty")
        return []
    for option in ("json", "junit"):
        if getattr(args, option) is not None:
            checked_output(getattr(args, option), option)
    if args.json is not None and args.json == args.junit:
        _refuse("junit", "--junit and --json name the same file")
    if args.expected_failures is None:
        return []
    from .conformance import expected

    checked_input_file(args.expected_failures, "expected_failures", limit=expected.MAX_BYTES)
    try:
        return expected.load(args.expected_failures)
    except (OSError, UnicodeError, ValueError) as error:
        _refuse("expected_failures", f"{args.expected_failures}: {error}")


def _selection(args: argparse.Namespace) -> list[str]:
    return [part for text in args.select or [] for part in text.split(",") if part]


def _plan(args: argparse.Namespace, expected_failures: list[Any]) -> Any:
    from .conformance import registry, suite

    try:
        return suite.make_plan(
            args.runtimes,
            args.runtime_module or [],
            _selection(args),
            args.shard,
            expected_failures,
            known_defects=not args.no_known_defects,
            probe_timeout_s=args.timeout or registry.PROBE_TIMEOUT_S,
        )
    except suite.PlanError as error:
        raise InvalidInputError(error.option, str(error)) from None


def _conformance_write(args: argparse.Namespace, writer: str) -> int:
    """``--write-corpus`` (a copy of the selected part of the corpus tree) or a test writer."""
    from .conformance import suite

    folder = getattr(args, writer)
    cases = _plan_cases(args)
    try:
        if writer == "write_corpus":
            count = suite.write_corpus(cases, folder)
        else:
            try:
                from .conformance import writers  # type: ignore[attr-defined,unused-ignore]
            except ImportError:
                _refuse(writer, "this installation of ctcop has no test writers (ctcop.conformance.writers)")
            count = int(getattr(writers, writer)(cases, folder))
    except OSError as error:
        raise InvalidInputError(writer, f"cannot write {folder!r}: {error.strerror or error}") from None
    _show(f"wrote {count} cases to {folder}")
    return 0


def _plan_cases(args: argparse.Namespace) -> list[Any]:
    from .conformance import suite

    try:
        return list(suite.select_cases(_selection(args), args.shard))
    except suite.PlanError as error:
        raise InvalidInputError(error.option, str(error)) from None


def _print_report(runtimes: list[Any], results: list[Any], cases: dict[str, Any], head: str, details: int) -> None:
    from .conformance import classes, known, report

    names = [runtime["name"] for runtime in runtimes]
    lines = [head, "", *report.format_table(runtimes, results)]
    lines += report.format_problems(results, names, details)
    sizes = {case_id: classes.facts(case).elements for case_id, case in cases.items()}
    lines += known.format_groups(known.group(results, sizes))
    lines += classes.format_classes(classes.group(results, cases))
    _show(*lines)


def _write_reports(args: argparse.Namespace, runtimes: list[Any], results: list[Any], json_text: str) -> None:
    from .conformance import junit

    if args.json:
        write_atomically(args.json, json_text)
    if args.junit:
        write_atomically(args.junit, junit.document(runtimes, results), what="junit")


def _conformance(args: argparse.Namespace) -> int:
    """Measure the installed runtimes against the reference on the bundled corpus."""
    expected_failures = _conformance_checked(args)
    writer = _writing(args)
    if writer is not None:
        return _conformance_write(args, writer)
    from .conformance import report, runner, suite

    plan = _plan(args, expected_failures)
    settings = runner.Settings(
        jobs=args.jobs or suite.default_jobs(), timeout_s=args.timeout or runner.DEFAULT_TIMEOUT_S
    )
    environment = suite.environment(plan, settings, args.expected_failures)
    runtimes, cases = plan.runtimes(), {case.id: case for case in plan.cases}
    results: list[dict[str, Any]] = []
    progress = report.Progress(len(plan.runnable) * len(plan.cases))
    selection = ", ".join(_selection(args)) or "all but scale"
    head = (
        f"CTCLoss-4 conformance: {len(plan.cases)} cases ({selection}"
        f"{'' if args.shard is None else f', shard {args.shard[0]}/{args.shard[1]}'}), "
        f"each evaluated twice per runtime, {settings.jobs} job(s)"
    )
    interrupted: Interrupted | None = None
    try:
        suite.run(plan, settings, results, progress.step)
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
        results = runner.sort_results(results, [r["name"] for r in runtimes])
    finally:
        progress.close()
    name = None if interrupted is None else interrupted.name
    # The reports first: printing may block on a full pipe, and a signal meanwhile must not cost them.
    written = False
    try:
        _write_reports(args, runtimes, results, report.document(runtimes, results, environment, name))
        written = True
        _print_report(runtimes, results, cases, head, 5 if args.details is None else args.details)
    except BaseException as error:
        if interrupted is None and (interrupted := interruption(error)) is not None:
            interrupted.finished = written
        if interrupted is None:
            raise
    if interrupted is not None:
        interrupted.report = args.json if written else None
        raise interrupted
    return report.exit_code(results)


def _defects(args: argparse.Namespace) -> int:
    """The registry of known defects (``ctcop defects``): one line each, or the spec's tables."""
    from .defects import markdown, registry

    known = registry()
    if args.markdown:
        print(markdown(list(known.defects)))
        return 0
    for library in known.libraries.values():
        installed = library.installed()
        state = "not installed" if installed is None else f"installed {installed}"
        if installed is not None and installed != library.measured:
            state += ": re-measure"
        print(f"{library.name} (measured on {library.measured}, {state})")
        for entry in known.of_library(library.name):
            kind = " (deliberate)" if entry.kind == "deliberate" else ""
            print(f"  {entry.id:<4} {','.join(entry.runtimes) or '-'}: {entry.title}{kind}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    """Merge the ``--json`` reports of shards into one."""
    import json

    from .conformance import corpus, report, shard

    checked_output(args.output, "output")
    if args.junit is not None:
        checked_output(args.junit, "junit")
    documents = []
    for path in args.reports:
        checked_input_file(path, "reports")
        try:
            documents.append(report.read(path))
        except (OSError, UnicodeError, ValueError) as error:
            _refuse("reports", f"{path}: not a JSON report: {_one_line(str(error))}")
    try:
        merged = report.merge(documents, args.reports)
    except (shard.MergeError, KeyError, TypeError, AttributeError) as error:
        _refuse("reports", str(error) if isinstance(error, shard.MergeError) else f"not a conformance report ({error})")
    write_atomically(args.output, json.dumps(merged, indent=1, allow_nan=False) + "\n", what="output")
    if args.junit:
        from .conformance import junit

        write_atomically(args.junit, junit.document(merged["runtimes"], merged["results"]), what="junit")
    cases = {case.id: case for case in corpus.load_all()}
    shards = ", ".join(merged["selection"]["merged"])
    head = f"CTCLoss-4 conformance, merged: {merged['selection']['cases']} cases, shards {shards}"
    _print_report(merged["runtimes"], merged["results"], cases, head, 5 if args.details is None else args.details)
    _show(f"wrote {args.output}")
    return report.exit_code(merged["results"])


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("ctcop", "numpy", "onnx", "onnxruntime", "openvino"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def _selected_layers(opened: Any, names: list[str] | None) -> list[Any]:
    if not names:
        return list(opened.layers)
    known = {printable(layer.name): layer for layer in opened.layers}  # as validate shows them
    for name in names:
        if name not in known:
            raise InvalidInputError("layer", f"no CTCLoss layer named {name!r}; have {', '.join(known)}")
    return [known[name] for name in names]


def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (links and relative spellings resolved)."""
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):  # one does not exist (yet), or a NUL in a path
        return "\0" not in first + second and os.path.realpath(first) == os.path.realpath(second)


def _refuse_overwriting_inputs(output: str, what: str, inputs: Sequence[str]) -> None:
    """Refuse an output path that is one of the command's input files: writing the report would
    replace the user's model, its weights or its inputs."""
    for given in inputs:
        if _same_file(output, given):
            _refuse(what, f"{output!r} is an input file of this command ({given!r}): choose another path")


def _model_files(path: str) -> list[str]:
    """A model file and the files it brings: an IR's ``.bin``, an ONNX file's external data."""
    if path.endswith(".xml"):
        return [path, path[:-4] + ".bin"]
    if path.endswith(".onnx") and os.path.isfile(path):
        from .onnx.files import external_data_files

        return [path, *external_data_files(path)]
    return [path]


def _eval_checked(args: argparse.Namespace) -> None:
    if args.json is not None:
        given = [*_model_files(args.model), *([args.inputs] if args.inputs is not None else [])]
        checked_output(args.json, "json")
        _refuse_overwriting_inputs(args.json, "json", given)
    if args.inputs is not None:
        _refuse_ignored(args, ["seed"], "with --inputs (it seeds the random inputs drawn without it)")
        checked_input_file(args.inputs, "inputs")
    if args.runtime == "onnxruntime":
        _refuse_ignored(args, ["device"], "with --runtime onnxruntime (it is an OpenVINO device)")


def _evaluate(args: argparse.Namespace, state: dict[str, Any]) -> list[Any]:
    """Open the model, draw or check its inputs and evaluate its layers; ``state`` holds the
    runtime and the results as they become known, so that an interruption can report them."""
    from .layers import evaluate, feeds, files, model

    opened = model.open_model(args.model)
    layers = _selected_layers(opened, args.layer)
    runtime = args.runtime or ("openvino" if opened.file.kind == "ir" else "onnxruntime")
    if runtime == "onnxruntime" and opened.file.kind == "ir":
        raise InvalidInputError("runtime", "onnxruntime runs ONNX files only; an IR runs on openvino")
    state["runtime"] = runtime
    if runtime == "onnxruntime":
        _refuse_ignored(args, ["precision"], "with onnxruntime (it is OpenVINO's inference precision)")
    if runtime == "openvino":
        from .openvino.files import checked_device

        checked_device(state["device"])
    if args.inputs:
        chosen = feeds.checked_feeds(files.load_inputs(args.inputs), opened.inputs)
    else:
        chosen = feeds.random_feeds(opened.inputs, list(opened.layers), 0 if args.seed is None else args.seed)
    kind, device, precision = opened.file.kind, state["device"], args.precision or "declared"
    evaluate.evaluate_layers(args.model, kind, layers, chosen, runtime, device, state["results"], precision)
    return list(state["results"])


def _eval(args: argparse.Namespace) -> int:
    """Evaluate every CTCLoss layer of a user's model by the reference and by the runtime."""
    _eval_checked(args)
    from .layers import report

    state: dict[str, Any] = {"runtime": args.runtime or "", "device": args.device or "CPU", "results": []}

    def document(results: list[Any], interrupted_by: str | None) -> str:
        versions = _versions()
        return report.document(
            args.model, state["runtime"], state["device"], versions, results, interrupted_by=interrupted_by
        )

    try:
        results = _evaluate(args, state)
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
        if args.json:
            write_atomically(args.json, document(state["results"], interrupted.name))
            interrupted.report = args.json
        raise interrupted from None
    if args.json:  # before the table: a stdout that blocks or fails cannot cost the report
        write_atomically(args.json, document(results, None))
    _show(*report.format_table(results))
    return 0 if all(result.verdict == "agree" for result in results) else 1


def _validate(args: argparse.Namespace) -> int:
    """List the CTCLoss layers of a model and check each against the spec and the schema."""
    from .layers import model, validate

    opened = model.open_model(args.model)
    errors = 0
    for layer in opened.layers:
        flags = ",".join(f"{k}={v}" for k, v in layer.attributes.items())
        _show(f"layer {layer.name} [{layer.form}] {flags}")
        for port in layer.ports:
            shape = (
                "?" if port.shape is None else "[" + ",".join("?" if d is None else str(d) for d in port.shape) + "]"
            )
            constant = f" = {port.constant.tolist()}" if port.constant is not None and port.constant.size <= 8 else ""
            _show(f"  {port.name:<16}{port.dtype:<9}{shape:<14}from {port.producer}{constant}")
        for finding in validate.validate_layer(layer):
            errors += finding.level == "error"
            _show(f"  {finding.line()}")
    print(f"{len(opened.layers)} layer(s), {errors} error(s)")
    if opened.nested_layers:
        print(f"note: {opened.nested_layers} more inside If/Loop/TensorIterator bodies, which ctcop does not evaluate")
    return 1 if errors else 0


def _bench_settings(args: argparse.Namespace) -> Any:
    """Check the output paths, matplotlib for ``--plot`` and the names, before any work."""
    from .bench import plot, run
    from .bench.results import Settings
    from .bench.threads import cores
    from .bench.timing import Protocol

    for option, suffix in (("json", ""), ("plot", ".png")):
        if getattr(args, option) is not None:
            checked_output(getattr(args, option), option, suffix)
    if args.json is not None and args.json == args.plot:
        _refuse("plot", "--plot and --json name the same file")
    if args.plot is not None and plot.missing():
        _refuse("plot", plot.missing() or "")
    quick = bool(args.quick)
    protocol = Protocol(
        threads=args.threads or cores(),
        repeat=args.repeat or (3 if quick else 7),
        warmup=1 if args.warmup is None else args.warmup,
        min_time_s=args.min_time or (0.02 if quick else 0.1),
    )
    shapes = run.chosen_shapes(quick, args.shapes, args.batches)
    names = run.implementation_names(args.implementations)
    return Settings(shapes, names, protocol, memory=not args.no_memory, quick=quick)


def _bench(args: argparse.Namespace) -> int:
    """Time ctcop, its exports and the installed frameworks' CTC losses; print the tables."""
    import json

    from .bench import plot, run, table
    from .bench.results import document

    settings = _bench_settings(args)
    found = run.start(settings)
    print("\n".join(table.head(found)), flush=True)
    bar = run.progress(run.total_steps(settings, found.timed_names()))
    interrupted: Interrupted | None = None
    try:
        run.run(settings, found, lambda what: (bar.set_description_str(what, refresh=False), bar.update()))
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
        found.interrupted_by = interrupted.name
    finally:
        bar.close()
    print("\n".join(table.body(found)))
    if args.json:
        write_atomically(args.json, json.dumps(document(found), indent=1) + "\n")
    if args.plot and found.cells:
        plot.write_plot(found, args.plot)
    if interrupted is not None:
        interrupted.report = args.json
        raise interrupted
    return 0 if all(cell.status == "ok" for cell in found.cells) else 1


# The parser.


def _attribute_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per attribute of the spec's form, each flipping the schema's default."""
    for name, default in form("time_major").attributes.items():
        flag = name.replace("_", "-")
        if default:
            parser.add_argument(f"--no-{flag}", dest=name, action="store_false", help=f"{name} = false")
        else:
            parser.add_argument(f"--{flag}", dest=name, action="store_true", help=f"{name} = true")


def _seconds(text: str) -> float:
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, {MAX_TIMEOUT_S}] (ASCII digits)")
    return float(text)


def _shard(text: str) -> tuple[int, int]:
    from .conformance.shard import parse

    try:
        return parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _conformance_parser(suite: argparse.ArgumentParser) -> None:
    runs = suite.add_argument_group("what runs")
    runs.add_argument("--runtimes", type=_runtime_names, help="comma-separated runtime names (default: every one)")
    runs.add_argument(
        "--runtime-module",
        action="append",
        type=_text("MODULE:ATTRIBUTE"),
        metavar="MOD:ATTR",
        help="add the runtimes of pkg.mod:attr or path/file.py:attr (a runtime, a list, or a callable; repeatable)",
    )
    runs.add_argument(
        "--select",
        action="append",
        type=_text("case selection"),
        metavar="TAG|GLOB",
        help="cases by tag or id glob, e.g. float32, 'spec/empty_*' (repeatable, comma lists; default: all but scale)",
    )
    runs.add_argument("--cases", action="append", dest="select", type=_text("case glob"), help="the same as --select")
    runs.add_argument("--shard", type=_shard, metavar="K/N", help="only shard K of N of the selected cases")
    runs.add_argument("--jobs", type=_integer(1, MAX_JOBS), help="worker processes (default: the CPUs)")
    runs.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="per evaluation and per --runtime-module load (default 120)"
    )
    runs.add_argument("--expected-failures", metavar="FILE", help="known failures: xfail, or xpass when they pass")
    runs.add_argument(
        "--no-known-defects",
        action="store_true",
        help="do not apply ctcop's registry of known defects (ctcop defects): every failure counts",
    )
    out = suite.add_argument_group("reports")
    out.add_argument("--details", type=_integer(0, MAX_DETAILS), help="problems listed per runtime (default 5)")
    out.add_argument("--json", help="write the report (schema ctcop-conformance-2) to this file")
    out.add_argument("--junit", metavar="PATH", help="write JUnit XML (a testsuite per runtime) to this file")
    out.add_argument("--strict", action="store_true", help="exit 1 on any problem (the default; kept for scripts)")
    writers = suite.add_mutually_exclusive_group()
    writers.add_argument("--write-corpus", metavar="DIR", help="copy the selected cases' corpus tree, run nothing")
    writers.add_argument("--write-onnx-tests", metavar="DIR", help="write the selected cases as ONNX backend tests")
    writers.add_argument("--write-ir-tests", metavar="DIR", help="write the selected cases as OpenVINO IR tests")
    suite.set_defaults(run=_conformance)


def _merge_parser(merger: argparse.ArgumentParser) -> None:
    merger.add_argument("reports", nargs="+", metavar="REPORT.json", help="--json reports of shards")
    merger.add_argument("-o", "--output", required=True, help="the merged report")
    merger.add_argument("--junit", metavar="PATH", help="also write the merged results as JUnit XML")
    merger.add_argument("--details", type=_integer(0, MAX_DETAILS), help="problems listed per runtime (default 5)")
    merger.set_defaults(run=_merge)


def _export_parser(exporter: argparse.ArgumentParser) -> None:
    exporter.add_argument("--format", choices=["onnx", "ir"], default="onnx")
    exporter.add_argument("--form", choices=["lowered", "custom"], help="IR only: stock ops (default) or one layer")
    exporter.add_argument("-o", "--output", required=True, help="file to write (.xml for IR)")
    exporter.add_argument("--dtype", help="logits element type: float16, float32 (default), float64")
    exporter.add_argument("--mask-dtype", default="int32")
    exporter.add_argument("--labels-dtype", default="int64")
    exporter.add_argument("--dims", help="T,N,C: each a number or a symbolic name (default T,N,C)")
    _attribute_flags(exporter)
    exporter.add_argument("--opset", type=_integer(0, 10**6), help="ONNX only (default 18)")
    exporter.add_argument("--attach", metavar="MODEL", help="add the loss to this model instead")
    exporter.add_argument(
        "--logits-output", type=_text("output name"), help="with --attach: the [T,N,C] output, name or index"
    )
    exporter.set_defaults(run=_export)


def _eval_parser(evaluator: argparse.ArgumentParser) -> None:
    evaluator.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    evaluator.add_argument("--inputs", metavar="FILE.npz", help="the model's inputs, keyed by input name")
    evaluator.add_argument(
        "--seed", type=_integer(0, MAX_SEED), help="seed of the random inputs (without --inputs; default 0)"
    )
    evaluator.add_argument("--layer", action="append", type=_text("layer name"), help="only this layer (repeatable)")
    evaluator.add_argument(
        "--runtime", choices=["openvino", "onnxruntime"], help="default: openvino for IR, onnxruntime for ONNX"
    )
    evaluator.add_argument("--device", type=_pattern("OpenVINO device", _DEVICE), help="OpenVINO device (default CPU)")
    evaluator.add_argument(
        "--precision",
        choices=["declared", "native"],
        help="OpenVINO's inference precision: the layer's declared type (default) or the device's default",
    )
    evaluator.add_argument("--json", help="write the results to this file")
    evaluator.set_defaults(run=_eval)


def _bench_parser(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--quick", action="store_true", help="a reduced set of shapes and runs (well under a minute)")
    bench.add_argument("--json", metavar="PATH", help="write the results (schema ctcop-bench) to this file")
    bench.add_argument("--plot", metavar="PATH.png", help="plot time against N per shape (needs ctcop[bench])")
    bench.add_argument(
        "--implementations",
        type=_text("implementation list"),
        metavar="A,B",
        help="comma-separated names, or all (default: every default one that is installed; see the legend)",
    )
    bench.add_argument("--shapes", type=_text("shape list"), metavar="A,B", help="only these shapes (listed above)")
    bench.add_argument("--batches", type=_batches, metavar="N,M", help="for every shape, instead of its own")
    bench.add_argument(
        "--threads", type=_integer(1, 1024), help="threads for every implementation (default: all cores)"
    )
    bench.add_argument("--repeat", type=_integer(1, 1000), help="timed runs per cell, at least (default 7, quick 3)")
    bench.add_argument("--warmup", type=_integer(0, 100), help="untimed runs after the checked one (default 1)")
    bench.add_argument(
        "--min-time", type=_seconds, metavar="SECONDS", help="more runs until they add up to this (0.1, quick 0.02)"
    )
    bench.add_argument("--no-memory", action="store_true", help="skip the peak memory measurements")
    bench.set_defaults(run=_bench)


def _bench_description() -> str:
    from .bench.implementations import IMPLEMENTATIONS
    from .bench.shapes import FULL, QUICK

    def listed(shapes: Any) -> str:
        return "; ".join(f"{s.name} ({s.title}, N={','.join(map(str, s.batches))})" for s in shapes)

    names = ", ".join(name + ("" if i.default else " (not by default)") for name, i in IMPLEMENTATIONS.items())
    return (
        "Each implementation's losses are checked against ctcop.ctc_loss before it is timed; exit status 1\n"
        f"when one disagrees or fails.\nshapes: {listed(FULL)}\nquick: {listed(QUICK)}\nimplementations: {names}"
    )


def _batches(text: str) -> list[int]:
    from .bench.run import batch_sizes

    try:
        return batch_sizes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ctcop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ctcop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    example = commands.add_parser("example", help="evaluate the spec's worked examples")
    example.set_defaults(run=_example)
    _conformance_parser(commands.add_parser("conformance", help="measure installed runtimes against the reference"))
    _merge_parser(commands.add_parser("conformance-merge", help="merge the --json reports of conformance shards"))
    _export_parser(
        commands.add_parser("export", help="write CTCLoss-4 as ONNX or OpenVINO IR, or attach it to a model")
    )
    _eval_parser(
        commands.add_parser("eval", help="what the CTCLoss layers of an IR/ONNX file compute, and the runtime")
    )
    _bench_parser(
        commands.add_parser(
            "bench",
            help="time ctcop, its exports and the installed frameworks' CTC losses",
            description=_bench_description(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    defects = commands.add_parser("defects", help="the registry of known runtime defects conformance and eval apply")
    defects.add_argument("--markdown", action="store_true", help="the table the spec and docs show")
    defects.set_defaults(run=_defects)
    checker = commands.add_parser("validate", help="list and statically check the CTCLoss layers of an IR/ONNX file")
    checker.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    checker.set_defaults(run=_validate)
    return parser


def _failure(error: BaseException) -> int:
    """One line on stderr for ``error`` and the exit code; an interruption comes first, whatever
    a library turned it into."""
    interrupted = interruption(error)
    if interrupted is not None:
        kind = "report" if interrupted.finished else "partial report"
        where = f"{kind} in {interrupted.report}" if interrupted.report else "no report written"
        print(f"ctcop: interrupted by {interrupted.name}; {where}", file=sys.stderr)
        return 128 + interrupted.signum
    if isinstance(error, BrokenPipeError):  # stdout closed early (``ctcop ... | head -1``): as SIGPIPE would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    if isinstance(error, SystemExit):  # --help, --version and usage errors (already printed)
        return error.code if isinstance(error.code, int) else (0 if error.code is None else EXIT_USAGE)
    if isinstance(error, InvalidInputError):
        print(f"ctcop: invalid input: {_one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(error, OSError):  # the file system refused something after the checks (disk full, ...)
        print(f"ctcop: {_one_line(str(error)) or type(error).__name__}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(error, Exception):  # a bug of ctcop: still one line
        print(f"ctcop: internal error: {type(error).__name__}: {_first_line(str(error))}", file=sys.stderr)
        return EXIT_INTERNAL
    raise error


def _run(argv: Sequence[str] | None) -> int:
    """Parse and run; every failure mode becomes one line on stderr and an exit code."""
    try:
        args = build_parser().parse_args(argv)
        code = int(args.run(args))
        if sys.stdout is not None:  # None when the process started with its stdout closed
            sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BaseException as error:
        return _failure(error)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ctcop`` entry point: SIGINT and SIGTERM raise :class:`Interrupted` while it runs; once
    one has, both stay ignored after it returns (the process is ending with that signal's code)."""
    signals = (signal.SIGINT, signal.SIGTERM)
    _RECEIVED.clear()
    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there
    previous = {signum: signal.signal(signum, _on_signal) for signum in signals} if in_main_thread else {}
    try:
        return _run(argv)
    finally:
        # Once interrupted the process is ending with the first signal's code: a later signal,
        # even one that comes while the interpreter shuts down, is still ignored.
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if _RECEIVED else handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
