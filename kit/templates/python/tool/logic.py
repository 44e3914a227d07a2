"""The tool's logic, in plain Python: ``make test`` runs it with your own
python3, no component needed. Only ``agentd.errors`` is imported from the
SDK here, which (unlike the rest of it) needs no generated bindings."""

from agentd.errors import InvalidInput


def count(text: str) -> str:
    if not text:
        raise InvalidInput("`text` is empty: there is nothing to count")
    return f"{len(text.split())} words, {len(text.splitlines())} lines, {len(text)} characters"
