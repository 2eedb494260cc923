#!/usr/bin/env python3
"""Lists the C++ functions in the given folders that are longer than a limit.

A function's length is counted from the first line of its declarator to its closing
brace, lambdas included in their enclosing function. The scan strips comments and
literals and follows braces: a brace opens a function when the text before it (since
the last ';', '{' or '}') has a parameter list and it is not inside another function.
That is exact for clang-formatted code, which is all this project has.

Usage: function_lengths.py [--limit N] [--check] FOLDER_OR_FILE...
With --check it exits 1 when any function is over the limit.
"""

import argparse
import pathlib
import re
import sys

_TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"([^(]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.S,
)


def _blank(match):
    text = match.group(0)
    if text.startswith("//") or text.startswith("/*"):
        return re.sub(r"[^\n]", " ", text)
    return '""' + "\n" * text.count("\n")


def functions(source):
    """Yields (name, first line, last line) for each function defined in the source."""
    text = _TOKEN.sub(_blank, source)
    # Preprocessor lines, with their continuations, keeping the line count.
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M)
    stack = []  # one entry per open brace: (kind, name, first line)
    head_start = 0  # where the text before the next brace begins
    line = 1
    for position, char in enumerate(text):
        if char == "\n":
            line += 1
        elif char == ";":
            head_start = position + 1
        elif char == "{":
            head = text[head_start:position]
            in_function = any(kind == "function" for kind, _, _ in stack)
            kind = "block"
            name = ""
            if not in_function and "(" in head and not re.search(r"\b(class|struct|union|enum|namespace)\b", head.split("(")[0]):
                kind = "function"
                name_match = re.search(r"([~\w:]+(?:operator\s*\S+?)?)\s*\(", head)
                name = name_match.group(1) if name_match else "?"
            first = line - head.strip().count("\n") if head.strip() else line
            stack.append((kind, name, first))
            head_start = position + 1
        elif char == "}":
            if stack:
                kind, name, first = stack.pop()
                if kind == "function":
                    yield name, first, line
            head_start = position + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("folders", nargs="+")
    arguments = parser.parse_args()
    over = []
    for folder in arguments.folders:
        root = pathlib.Path(folder)
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.suffix not in (".cpp", ".h", ".cu", ".cuh"):
                continue
            for name, first, last in functions(path.read_text()):
                length = last - first + 1
                if length > arguments.limit:
                    over.append((length, f"{path}:{first}", name))
    for length, where, name in sorted(over, reverse=True):
        print(f"{length:5d}  {where}  {name}")
    if arguments.check and over:
        print(f"{len(over)} function(s) over {arguments.limit} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
