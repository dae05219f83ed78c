"""The conformance runner: every chosen runtime on every selected case of the data corpus, twice,
in crash-isolated worker processes.

**Workers.** Each evaluation runs in a crash-isolated worker process (:mod:`.pool`): a crash or
a timeout costs that evaluation only.

**Twice.** Every case is evaluated twice per runtime: by two different workers when ``jobs`` > 1
(concurrently where they are free), by the same worker one after the other otherwise (except
after an evaluation the pool ends its worker for, ``Settings.alone``). Two answers
that differ bit for bit (NaN == NaN; or in kind: a value and an exception, a crash and a value)
make the case ``nondeterministic``, whatever the reference says; otherwise the first answer's
verdict stands. A timeout in either run is the case's ``timeout``. The results do not depend on
``jobs``: each (runtime, case) is judged from its own two evaluations only, and results are in
runtime order, then case id.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .pool import DEFAULT_TIMEOUT_S, Key, Pool, Runtimes, Settings, Task
from .result import Result

if TYPE_CHECKING:
    from .case import Case

__all__ = ["DEFAULT_TIMEOUT_S", "RUNS", "Runtimes", "Settings", "combine", "run_cases", "sort_results", "tasks_for"]

RUNS = 2


# -- two evaluations, one result -----------------------------------------------------------------


def _describe(answer: Result) -> str:
    if answer.answer == "value":
        return "returned [" + " ".join(answer.loss[:8]) + "]"
    if answer.answer == "skip":
        return f"unsupported ({answer.message})"
    return answer.message


def _difference(first: Result, second: Result) -> str:
    if first.answer == second.answer == "value":
        a, b = first.loss, second.loss
        if a != b:
            where = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            x = a[where] if where < len(a) else "nothing"
            y = b[where] if where < len(b) else "nothing"
            return (
                f"sample {where}: run 1 gave {x}, run 2 gave {y} (run 1 {_describe(first)}; run 2 {_describe(second)})"
            )
        if first.loss_bits != second.loss_bits:
            return f"the two runs' losses differ in element type or shape (run 1 {_describe(first)})"
        return f"the gradient differs between the two runs (the loss is the same: {_describe(first)[9:]})"
    return f"run 1 {_describe(first)}; run 2 {_describe(second)}"


def combine(first: Result, second: Result) -> Result:
    """The case's result from its two evaluations (module docstring): the first's, unless either
    timed out or the two differ; its ``seconds`` the two evaluations' (None if either is unknown)."""
    seconds = None if first.seconds is None or second.seconds is None else first.seconds + second.seconds
    for number, answer in enumerate((first, second), 1):
        if answer.answer == "timeout":
            return Result(first.case, first.runtime, "timeout", f"{answer.message} (run {number})", seconds=seconds)
    same = first.answer == second.answer and all(
        getattr(first, part) == getattr(second, part) for part in ("loss_bits", "grad_bits", "loss")
    )
    if not same:
        return Result(first.case, first.runtime, "nondeterministic", _difference(first, second), seconds=seconds)
    return replace(first, seconds=seconds)


def tasks_for(
    runtimes: Sequence[str], case_ids: Sequence[str], only: Mapping[str, Collection[str]] | None = None
) -> list[Task]:
    """Every evaluation, in order: runtime, case, run; a runtime that ``only`` names evaluates the
    cases of ``case_ids`` it lists, the others every case."""
    limits = only or {}
    order = [
        (runtime, case, run)
        for runtime in runtimes
        for case in case_ids
        if runtime not in limits or case in limits[runtime]
        for run in range(RUNS)
    ]
    return [Task(number, *item) for number, item in enumerate(order)]


def run_cases(
    runtimes: Runtimes,
    cases: Sequence[Case],
    settings: Settings,
    on_result: Callable[[Result], None],
    only: Mapping[str, Collection[str]] | None = None,
) -> None:
    """Evaluate every case with every runtime named by ``runtimes`` (in order), twice (a runtime
    that ``only`` names: the cases it lists, :func:`tasks_for`); ``on_result`` gets each
    (runtime, case)'s :class:`~.result.Result` as soon as its two evaluations are in."""
    by_id = {case.id: case for case in cases}
    answers: dict[Key, dict[int, Result]] = {}

    def on_run(task: Task, answer: Result) -> None:
        got = answers.setdefault(task.key, {})
        got[task.run] = answer
        if len(got) == RUNS:
            del answers[task.key]
            on_result(combine(got[0], got[1]))

    pool = Pool(runtimes, by_id, settings, on_run)
    pool.run(tasks_for(list(runtimes.names), [case.id for case in cases], only))


def sort_results(results: Sequence[Result], runtimes: Sequence[str]) -> list[Result]:
    """Results in runtime order (``runtimes``), then case id."""
    rank = {name: index for index, name in enumerate(runtimes)}
    return sorted(results, key=lambda r: (rank.get(r.runtime, len(rank)), r.runtime, r.case))
