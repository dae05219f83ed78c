"""The conformance suite measured by the bugs it catches: a plain implementation of the spec
(:mod:`.plain`) and its mutants (:mod:`.mutants`), each one rule broken, run through the ordinary
runner (``ctcop conformance --self-check``) and scored (:mod:`.score`)."""

from .mutants import MUTANTS
from .plain import Plain

RUNTIMES = [Plain(), *(Plain(bug) for bug in MUTANTS)]
