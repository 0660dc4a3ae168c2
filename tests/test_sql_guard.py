"""SQL guard: values reach ClickHouse only as bound parameters.

An f-string handed to `clickhouse.query/query_rows/query_value/query_decoded/command/insert`
may interpolate only SQL the code itself builds: module constants (UPPER_CASE), a join of
them, arithmetic on them, the eligibility builders, and the few reviewed local names below.
A new interpolation fails this test until it is reviewed and listed, so a value pasted into
SQL cannot slip in by habit.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXECUTE = {"query", "query_rows", "query_value", "query_decoded", "command", "insert"}
# Functions that return SQL assembled from code only (never from a request's values).
BUILDERS = {"where", "in_eligible", "select", "_scope_sql"}
# Local names bound only to code-made SQL, each reviewed: (file, name).
REVIEWED = {
    ("retrieval/search/legs/__init__.py", "table"),  # matches(): the callers' table names, constants
    ("retrieval/search/legs/__init__.py", "column"),  # ...and their column names
    ("retrieval/search/legs/__init__.py", "condition"),  # ...and their extra conditions, constants
    ("retrieval/search/legs/digests.py", "narrowing"),  # column names from _DIGEST_FILTERS, values bound
    ("retrieval/search/legs/lexical.py", "only"),  # the pool's ids as a condition, the ids bound
    ("retrieval/store/reads.py", "table"),  # side_tables_held(), live_side(): table names come from SIDE_KEYS only
    ("retrieval/store/reads.py", "column"),  # live_side(): the side table's key column, from SIDE_KEYS
    ("retrieval/store/reads.py", "direction"),  # "ASC" or "DESC"
    ("retrieval/store/reads.py", "sort"),  # a column of _ORDERS, by a validated order
    ("retrieval/store/reads.py", "sort_type"),  # ...and its type
    ("retrieval/ingest/reembed.py", "table"),  # a loop over the vector tables' names
    ("retrieval/index/reading.py", "where"),  # the tenant condition with bound parameters
    ("retrieval/index/reading.py", "columns"),  # a tuple of column names
    ("retrieval/ingest/side_rows.py", "table"),  # a loop over SIDE_TABLES
    ("retrieval/ingest/write_gates.py", "batch_scope"),  # built from index.SCOPE
    ("retrieval/ingest/write_gates.py", "same_scope"),  # built from index.SCOPE
}


def interpolations():
    """(file, line, expression) of every value an f-string handed to a clickhouse call interpolates."""
    for path in sorted(ROOT.glob("**/*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith((".venv/", "tests/", "bench/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), relative)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in EXECUTE
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "clickhouse"
                and node.args
                and isinstance(node.args[0], ast.JoinedStr)
            ):
                for part in node.args[0].values:
                    if isinstance(part, ast.FormattedValue):
                        yield relative, part.lineno, part.value


def allowed(relative: str, expression: ast.expr) -> bool:
    match expression:
        case ast.Name(id=name):
            return name.lstrip("_").isupper() or (relative, name) in REVIEWED
        case ast.Attribute(attr=attr):
            return attr.isupper()
        case ast.BinOp(left=left, right=right):
            return all(allowed(relative, side) or isinstance(side, ast.Constant) for side in (left, right))
        case ast.IfExp(body=body, orelse=orelse):
            return allowed(relative, body) and allowed(relative, orelse)
        case ast.Call(func=ast.Attribute(value=ast.Constant(), attr="join"), args=[argument]):
            return allowed(relative, argument)
        case ast.Call(func=ast.Attribute(attr=name)) | ast.Call(func=ast.Name(id=name)):
            return name in BUILDERS
    return False


def test_sql_interpolates_only_code_made_sql():
    found = list(interpolations())
    assert len(found) > 40  # the scan sees the statements it guards
    refused = [
        f"{relative}:{line}: {{{ast.unparse(expression)}}}"
        for relative, line, expression in found
        if not allowed(relative, expression)
    ]
    assert refused == []


def test_the_guard_refuses_a_value_pasted_into_sql():
    statement = ast.parse("clickhouse.query(f\"SELECT * FROM memories WHERE memory_key = '{memory_key}'\")")
    value = statement.body[0].value.args[0].values[1].value
    assert not allowed("retrieval/store/reads.py", value)
    assert not allowed("retrieval/store/reads.py", ast.parse("request.query").body[0].value)
    assert allowed("retrieval/store/reads.py", ast.parse("TIE_BREAK").body[0].value)
