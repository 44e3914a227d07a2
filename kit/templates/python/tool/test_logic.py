"""Native tests of ``src/logic.py``: ``make test`` (or
``python3 -m unittest discover -s tests``)."""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "src"), os.path.join(here, "..", "sdk")]

import logic  # noqa: E402
from agentd.errors import InvalidInput  # noqa: E402


class CountTest(unittest.TestCase):
    def test_counts_words_lines_and_characters(self):
        self.assertEqual(logic.count("one two\nthree"), "3 words, 2 lines, 13 characters")

    def test_empty_text_is_invalid_input(self):
        with self.assertRaises(InvalidInput) as raised:
            logic.count("")
        self.assertEqual(raised.exception.code, "invalid-input")


if __name__ == "__main__":
    unittest.main()
