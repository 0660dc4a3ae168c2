"""retrieval/knobs.py: the one table of ranking knobs, what settings.py reads and what docs/operating.md shows."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from loom_site import env
from retrieval import knobs

OPERATING = Path(__file__).resolve().parent.parent / "docs" / "operating.md"


def test_the_documented_table_is_the_one_generated_from_the_knobs():
    shown = re.search(r"<!-- knobs:start -->\n(.*?)\n<!-- knobs:end -->", OPERATING.read_text(), re.S)
    assert shown, "docs/operating.md lost its knobs markers"
    assert shown.group(1) == knobs.markdown(), "the knobs table is stale: paste `python -m retrieval.knobs` into it"


def test_every_search_setting_is_a_knob_and_settings_serve_its_value():
    search_settings = {name for name in dir(settings) if name.startswith("LOOM_MEMORY_SEARCH_")}
    assert search_settings <= {knob.name for knob in knobs.SETTINGS}
    for knob in knobs.SETTINGS:
        assert getattr(settings, knob.name) == (list(knob.default) if isinstance(knob.default, tuple) else knob.default)


def test_names_are_unique_and_every_constant_is_what_the_module_exports():
    names = [knob.name for knob in knobs.TABLE]
    assert len(names) == len(set(names))
    for knob in knobs.TABLE:
        if not knob.setting:
            assert getattr(knobs, knob.name) == knob.default, knob.name


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("LOOM_MEMORY_SEARCH_PER_KEY_CAP", "3", 3),
        ("LOOM_MEMORY_SEARCH_DEFAULT_ALPHA", "0.4", 0.4),
        ("LOOM_MEMORY_SEARCH_DEFAULT_MODE", "hybrid", "hybrid"),
        ("LOOM_MEMORY_SEARCH_SOURCE_CLASS_BOOST_ELIGIBLE", "asserted, observed", ["asserted", "observed"]),
    ],
)
def test_a_setting_reads_the_environment(monkeypatch, name, raw, expected):
    monkeypatch.setenv(name, raw)
    assert next(knob for knob in knobs.SETTINGS if knob.name == name).read(env) == expected


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("LOOM_MEMORY_SEARCH_PER_KEY_CAP", "-1"),
        ("LOOM_MEMORY_SEARCH_DEFAULT_ALPHA", "1.5"),
        ("LOOM_MEMORY_SEARCH_DEFAULT_MODE", "fuzzy"),
        ("LOOM_MEMORY_SEARCH_MIN_SIMILARITY", "high"),
    ],
)
def test_a_setting_out_of_its_bounds_stops_the_boot_naming_it(monkeypatch, name, raw):
    monkeypatch.setenv(name, raw)
    with pytest.raises(ImproperlyConfigured, match=name):
        next(knob for knob in knobs.SETTINGS if knob.name == name).read(env)
