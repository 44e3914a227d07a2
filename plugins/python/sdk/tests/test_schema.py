"""Unit tests of agentd.schema in plain CPython (no component, no bindings):

    python3 -m unittest discover -s plugins/python/sdk/tests -t plugins/python/sdk

scripts/test.sh runs them.
"""

import enum
import json
import unittest
from typing import List, Literal, Optional

from agentd.errors import InvalidInput
from agentd.schema import describe, parse_docstring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    pattern: str,
    path: str = ".",
    max_results: int = 50,
    ignore_case: bool = False,
    ratio: float = 0.5,
    tags: list[str] = (),
    limit: Optional[int] = None,
    mode: Literal["fast", "slow"] = "fast",
    color: Color = Color.RED,
    anything=None,
) -> str:
    """Searches files for a pattern.

    More text that is not the description.

    Args:
        pattern: The regular
            expression.
        path (str): Where to look.
        max_results: At most this many.

    Returns:
        The matches.
    """
    return ""


class DescribeTest(unittest.TestCase):
    def setUp(self):
        self.d = describe(search)

    def test_description_is_the_first_paragraph(self):
        self.assertEqual(self.d.description, "Searches files for a pattern.")

    def test_schema_from_annotations(self):
        p = self.d.parameters
        self.assertEqual(p["type"], "object")
        self.assertEqual(p["required"], ["pattern"])
        self.assertFalse(p["additionalProperties"])
        props = p["properties"]
        self.assertEqual(props["pattern"], {"type": "string", "description": "The regular expression."})
        self.assertEqual(props["path"], {"type": "string", "default": ".", "description": "Where to look."})
        self.assertEqual(props["max_results"]["type"], "integer")
        self.assertEqual(props["max_results"]["default"], 50)
        self.assertEqual(props["ignore_case"], {"type": "boolean", "default": False})
        self.assertEqual(props["ratio"], {"type": "number", "default": 0.5})
        self.assertEqual(props["tags"], {"type": "array", "items": {"type": "string"}, "default": []})
        self.assertEqual(props["limit"], {"type": "integer"})
        self.assertEqual(props["mode"], {"type": "string", "enum": ["fast", "slow"], "default": "fast"})
        self.assertEqual(props["color"], {"type": "string", "enum": ["red", "blue"], "default": "red"})
        self.assertEqual(props["anything"], {})
        json.loads(self.d.parameters_json())

    def test_conversion(self):
        kw = self.d.convert(json.dumps({"pattern": "x", "max_results": 3.0, "ratio": 1, "tags": ["a"], "limit": None, "mode": "slow", "color": "blue", "anything": [1]}))
        self.assertEqual(kw["max_results"], 3)
        self.assertIsInstance(kw["max_results"], int)
        self.assertEqual(kw["ratio"], 1.0)
        self.assertIsInstance(kw["ratio"], float)
        self.assertEqual(kw["tags"], ["a"])
        self.assertIsNone(kw["limit"])
        self.assertEqual(kw["mode"], "slow")
        self.assertIs(kw["color"], Color.BLUE)
        self.assertEqual(kw["anything"], [1])
        self.assertNotIn("path", kw)  # the function's default applies

    def test_bad_arguments_name_the_parameter(self):
        cases = [
            ("{}", "missing required argument 'pattern'"),
            ("[1]", "must be a JSON object"),
            ("{not json", "not valid JSON"),
            ('{"pattern": 1}', "argument 'pattern': expected a string, got a number"),
            ('{"pattern": "x", "max_results": true}', "argument 'max_results': expected an integer, got a boolean"),
            ('{"pattern": "x", "max_results": 1.5}', "argument 'max_results': expected an integer"),
            ('{"pattern": "x", "tags": ["a", 2]}', "argument 'tags[1]': expected a string"),
            ('{"pattern": "x", "mode": "medium"}', "argument 'mode': \"medium\" is not one of \"fast\", \"slow\""),
            ('{"pattern": "x", "color": "green"}', "argument 'color'"),
            ('{"pattern": "x", "colour": "red"}', "unknown argument 'colour'"),
            ('{"pattern": "x", "ignore_case": "yes"}', "expected a boolean, got a string"),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                with self.assertRaises(InvalidInput) as e:
                    self.d.convert(args)
                self.assertIn(words, str(e.exception))
                self.assertEqual(e.exception.code, "invalid-input")

    def test_empty_arguments_are_an_empty_object(self):
        d = describe(lambda: None)
        self.assertEqual(d.convert(""), {})
        self.assertEqual(d.convert("null"), {})


class RefusedSignatures(unittest.TestCase):
    def test_var_args_and_unsupported_types_fail_at_build_time(self):
        def star(*a: int):
            """x"""

        def kw(**a: int):
            """x"""

        def obj(x: object):
            """x"""

        def keys(x: dict[int, str]):
            """x"""

        for f, words in [(star, "*a"), (kw, "*a"), (obj, "parameter 'x'"), (keys, "keys are strings")]:
            with self.subTest(f=f.__name__):
                with self.assertRaises(TypeError) as e:
                    describe(f)
                self.assertIn(words, str(e.exception))

    def test_typing_list_and_pep604_optional(self):
        def f(a: List[int], b: int | None = None, c: dict[str, int] | None = None):
            """F."""

        p = describe(f).parameters["properties"]
        self.assertEqual(p["a"], {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(p["b"], {"type": "integer"})
        self.assertEqual(p["c"], {"type": "object", "additionalProperties": {"type": "integer"}})


class Docstrings(unittest.TestCase):
    def test_an_optional_parameter_without_a_default_gets_none(self):
        def f(x: Optional[int], y: str = "d") -> str:
            return f"{x}-{y}"

        d = describe(f)
        self.assertNotIn("required", d.parameters)
        self.assertEqual(f(**d.convert("{}")), "None-d")
        self.assertEqual(f(**d.convert('{"x": 3}')), "3-d")

    def test_no_args_section(self):
        self.assertEqual(parse_docstring("One line."), ("One line.", {}))

    def test_description_spans_lines_and_stops_at_a_section(self):
        desc, args = parse_docstring("First line\ncontinues.\nArgs:\n    a: The a.\n")
        self.assertEqual(desc, "First line continues.")
        self.assertEqual(args, {"a": "The a."})


if __name__ == "__main__":
    unittest.main()
