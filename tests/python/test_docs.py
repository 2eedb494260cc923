"""The manual's tables against the code: docs/python.md's table of keywords and
defaults names every option of dash.default_options() with its default."""

import ast
import pathlib
import re

import dash

PYTHON_MD = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _top_level_items(text):
    """`a, (b, c), d` -> ['a', '(b, c)', 'd']."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += char in "(["
        depth -= char in ")]"
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return items + [current.strip()]


def documented_defaults():
    """{keyword: default} from the table under "## `dash.Dash(...)`"."""
    text = PYTHON_MD.read_text()
    table = text[text.index("| keyword | default |"):]
    table = table[:table.index("\n\n")]
    defaults = {}
    for row in table.splitlines()[2:]:
        keywords_cell, default_cell = row.split(" | ")[:2]
        keywords = re.findall(r"`(\w+)`", keywords_cell)
        values = [ast.literal_eval(item.strip("`")) for item in _top_level_items(default_cell)]
        if keywords[0] == "betas":  # `betas` = (`beta_grad`, `beta_factor`): one option in Python
            defaults["betas"] = values[0]
            continue
        assert len(values) in (1, len(keywords)), f"python.md row {keywords}: {len(values)} defaults"
        for keyword, value in zip(keywords, values * len(keywords) if len(values) == 1 else values):
            defaults[keyword] = value
    return defaults


def test_the_defaults_table_names_every_option_with_its_default():
    documented = documented_defaults()
    actual = dash.default_options()
    missing = sorted(set(actual) - set(documented))
    assert not missing, f"docs/python.md's defaults table lacks {missing}"
    unknown = sorted(set(documented) - set(actual))
    assert not unknown, f"docs/python.md's defaults table names {unknown}, which are no options"
    def same(a, b):
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return isinstance(a, bool) == isinstance(b, bool) and a == b

    wrong = {key: (documented[key], actual[key]) for key in actual if not same(documented[key], actual[key])}
    assert not wrong, f"docs/python.md's defaults (documented, actual): {wrong}"
