"""The test tiers keep their rules: no test module imports another test module or conftest
(shared helpers live in tests/helpers.py), and every test file sits in a tier."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_imports_another_test_module_or_conftest():
    offenders = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                last = name.rsplit(".", 1)[-1]
                if name.startswith("tests") and (last.startswith("test_") or last == "conftest"):
                    offenders.append(f"{path.relative_to(TESTS)} imports {name}")
    assert not offenders, offenders


def test_every_test_file_is_in_a_tier():
    stray = [p.name for p in TESTS.glob("test_*.py")]
    assert not stray, f"put these in tests/unit, tests/integration or tests/e2e: {stray}"
    assert {p.parent.name for p in TESTS.rglob("test_*.py")} == {"unit", "integration", "e2e"}
