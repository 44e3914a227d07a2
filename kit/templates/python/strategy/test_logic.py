"""Native tests of ``src/logic.py`` against a fake agent: ``make test`` (or
``python3 -m unittest discover -s tests``)."""

import os
import sys
import unittest
from types import SimpleNamespace as NS

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "src"), os.path.join(here, "..", "sdk")]

import logic  # noqa: E402


class FakeAgent:
    def __init__(self, replies):
        self.replies = list(replies)
        self.added = []
        self.finished = False

    def config(self):
        return NS(system_prompt="be brief", next_step_prompt=None, special_tools=["terminate"])

    def memory(self):
        return [NS(role="user", content="do it", tool_calls=[])]

    def tools(self):
        return []

    def chat(self, messages, tools=None):
        assert messages[0].role == "system"
        return NS(message=self.replies.pop(0))

    def add_message(self, message):
        self.added.append(message)

    def invoke_tool_text(self, call):
        return f"ran {call.name}"

    def finish(self):
        self.finished = True

    @staticmethod
    def system_message(text):
        return NS(role="system", content=text, tool_calls=[])

    @staticmethod
    def user_message(text):
        return NS(role="user", content=text, tool_calls=[])

    @staticmethod
    def assistant_message(text):
        return NS(role="assistant", content=text, tool_calls=[])

    @staticmethod
    def tool_message(call, text):
        return NS(role="tool", content=text, tool_calls=[], tool_call_id=call.id, name=call.name)


def calls(*names):
    return NS(role="assistant", content=None, tool_calls=[NS(id=f"call-{n}", name=n, arguments="{}") for n in names])


class StepTest(unittest.TestCase):
    def test_tool_calls_are_run_and_answered(self):
        agent = FakeAgent([calls("count")])
        self.assertEqual(logic.step(agent), "count: ran count")
        self.assertFalse(agent.finished)
        self.assertEqual(agent.added[-1].tool_call_id, "call-count")

    def test_a_special_tool_or_a_plain_answer_finishes(self):
        agent = FakeAgent([calls("terminate")])
        logic.step(agent)
        self.assertTrue(agent.finished)
        agent = FakeAgent([NS(role="assistant", content="all done", tool_calls=[])])
        self.assertEqual(logic.step(agent), "all done")
        self.assertTrue(agent.finished)


if __name__ == "__main__":
    unittest.main()
