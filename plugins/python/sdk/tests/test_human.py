"""Unit tests of agentd.ask_human in plain CPython, with stand-ins for the
modules componentize-py generates (``wit_world.imports``,
``componentize_py_types``), shaped like them: an import that returns its
value or raises ``Err(error)``.

    (cd plugins/python/sdk && python3 -m unittest discover -s tests)
"""

import enum
import importlib
import sys
import types as pytypes
import unittest
from dataclasses import dataclass


class ErrorCode(enum.Enum):
    INVALID_INPUT = 0
    FAILED = 5
    CANCELLED = 6


@dataclass
class Error:
    code: ErrorCode
    message: str


class Err(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value


def fake_bindings(ask):
    """The generated modules of a 0.2.2 world whose `human.ask` is `ask`
    (None: a world of an older contract, without `human`)."""
    cpt = pytypes.ModuleType("componentize_py_types")
    cpt.Err = Err
    world = pytypes.ModuleType("wit_world")
    imports = pytypes.ModuleType("wit_world.imports")
    imports.types = pytypes.SimpleNamespace(ErrorCode=ErrorCode, Error=Error)
    imports.logging = pytypes.SimpleNamespace()
    imports.config = pytypes.SimpleNamespace()
    if ask is not None:
        imports.human = pytypes.SimpleNamespace(ask=ask)
    world.imports = imports
    return {"componentize_py_types": cpt, "wit_world": world, "wit_world.imports": imports}


class AskHumanTest(unittest.TestCase):
    def setUp(self):
        self.saved = {k: v for k, v in sys.modules.items() if k == "agentd" or k.startswith("agentd.")}
        self.patched = []

    def tearDown(self):
        for name in list(sys.modules):
            if name == "agentd" or name.startswith("agentd.") or name in self.patched:
                del sys.modules[name]
        sys.modules.update(self.saved)

    def agentd_with(self, ask):
        """`agentd`, imported afresh over the stand-in bindings."""
        for name in list(sys.modules):
            if name == "agentd" or name.startswith("agentd."):
                del sys.modules[name]
        fakes = fake_bindings(ask)
        self.patched = list(fakes)
        sys.modules.update(fakes)
        return importlib.import_module("agentd")

    def test_the_answer_is_returned(self):
        asked = []

        def ask(question):
            asked.append(question)
            return "main"

        agentd = self.agentd_with(ask)
        self.assertEqual(agentd.ask_human("Which branch?"), "main")
        self.assertEqual(asked, ["Which branch?"])

    def test_the_hosts_error_is_raised_with_its_code_and_text(self):
        def ask(question):
            raise Err(Error(ErrorCode.FAILED, "no answer within 1h (input_timeout)"))

        agentd = self.agentd_with(ask)
        with self.assertRaises(agentd.HostError) as caught:
            agentd.ask_human("?")
        self.assertEqual(str(caught.exception), "no answer within 1h (input_timeout)")
        self.assertEqual(caught.exception.code, "failed")

        def cancelled(question):
            raise Err(Error(ErrorCode.CANCELLED, "the run was cancelled"))

        agentd = self.agentd_with(cancelled)
        with self.assertRaises(agentd.HostError) as caught:
            agentd.ask_human("?")
        self.assertEqual(caught.exception.code, "cancelled")

    def test_an_older_contract_says_it_has_no_human(self):
        agentd = self.agentd_with(None)
        with self.assertRaises(agentd.HostError) as caught:
            agentd.ask_human("?")
        self.assertIn("0.2.2", str(caught.exception))

    def test_without_bindings_it_raises_rather_than_failing_to_import(self):
        for name in list(sys.modules):
            if name == "agentd" or name.startswith("agentd."):
                del sys.modules[name]
        agentd = importlib.import_module("agentd")
        with self.assertRaises(agentd.HostError):
            agentd.ask_human("?")


if __name__ == "__main__":
    unittest.main()
