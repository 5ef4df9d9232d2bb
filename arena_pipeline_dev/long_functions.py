"""List the package's functions longer than a limit (issue 46: at most 8 over 80 lines): ``python -m arena_pipeline_dev.long_functions``.

A function's length is its lines from ``def`` (decorators excluded) to its last line, docstring included; a
nested function counts on its own and inside its parent. Prints the long ones, longest first, and their count.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "arena_pipeline"


def long_functions(limit: int = 80, root: Path = PACKAGE) -> list[tuple[int, str, str]]:
    """(lines, ``path:line``, name) of every function of ``root`` longer than ``limit`` lines, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append((length, f"{path.relative_to(root.parent)}:{node.lineno}", node.name))
    return sorted(found, reverse=True)


def main() -> None:
    """Print the long functions and their count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80, help="longest function allowed, in lines (default 80)")
    args = parser.parse_args()
    found = long_functions(args.limit)
    for length, where, name in found:
        print(f"{length:5d}  {where}  {name}")
    print(f"{len(found)} functions over {args.limit} lines")


if __name__ == "__main__":
    main()
