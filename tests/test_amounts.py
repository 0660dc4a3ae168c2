"""retrieval/language/amounts.py: the amounts a text states, and the unit a question asks to add up."""

import pytest

from retrieval.language import amounts, query


@pytest.mark.parametrize(
    ("said", "found"),
    [
        ("I spent $45.50 on groceries and 12 dollars on snacks", [(45.5, "USD"), (12.0, "USD")]),
        ("paid €1,200 rent; my salary is $85k", [(1200.0, "EUR"), (85000.0, "USD")]),
        ("practiced for 90 minutes, then 2 hours", [(1.5, "hour"), (2.0, "hour")]),
        ("ran 5 km, then 3.1 miles; lifted 80 kg", [(5.0, "km"), (3.1, "mile"), (80.0, "kg")]),
        ("born in 1990, three kids, room 101", []),  # a bare number is no amount
    ],
)
def test_amounts_are_read_with_their_canonical_unit(said, found):
    assert [(amount.value, amount.unit) for amount in amounts.found(said)] == found


@pytest.mark.parametrize(
    ("question", "intent", "unit"),
    [
        ("How much did I spend on books in total?", "sum", "money"),
        ("How much time did I spend gardening?", "sum", "hour"),
        ("How many hours did I practice guitar?", "sum", "hour"),
        ("What was the total distance in miles?", "sum", "mile"),
        ("How many books did I read?", "count", None),
        ("How much does Caroline like painting?", None, None),
    ],
)
def test_a_sum_is_asked_for_with_a_unit(question, intent, unit):
    assert (query.analyse(question).intent, amounts.asked_unit(question)) == (intent, unit)
