#!/usr/bin/env python3
"""Lists the include cycles between the units of a source tree.

A unit is a header and the source file of the same stem (optim/grafting.h with
optim/grafting.cpp): what one concept's file pair includes, it includes together.
Unit A depends on unit B when a file of A has `#include "B.h"` (quoted includes,
relative to the tree's root, as the project writes them). Two units that depend on
each other, directly or through others, form a cycle: neither can be read, tested or
replaced without the other, which docs/architecture.md rules out.

Usage: include_cycles.py [--check] [--within FOLDER] ROOT
ROOT is the tree the quoted includes are relative to (src/); --within limits the
report to cycles among the units under ROOT/FOLDER. With --check it exits 1 when
there is any.
"""

import argparse
import pathlib
import re
import sys

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit_graph(root):
    """{unit: set of units it includes}, a unit named by its path without suffix."""
    graph = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cpp", ".h", ".cu", ".cuh"):
            continue
        unit = str(path.relative_to(root).with_suffix(""))
        edges = graph.setdefault(unit, set())
        for included in _INCLUDE.findall(path.read_text()):
            target = str(pathlib.PurePosixPath(included).with_suffix(""))
            if target != unit and (root / included).exists():
                edges.add(target)
    return graph


def cycles(graph):
    """The strongly connected components of more than one unit (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(unit):
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for target in sorted(graph.get(unit, ())):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in on_stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted(found)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--within", default="")
    parser.add_argument("root")
    arguments = parser.parse_args()
    sys.setrecursionlimit(10000)
    within = arguments.within.rstrip("/")
    graph = unit_graph(pathlib.Path(arguments.root))
    if within:
        graph = {unit: {t for t in targets if t.startswith(within + "/")}
                 for unit, targets in graph.items() if unit.startswith(within + "/")}
    found = cycles(graph)
    for component in found:
        print("cycle: " + " <-> ".join(component))
    if arguments.check and found:
        print(f"{len(found)} include cycle(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
