"""Observation formats: each renders any JSON-like fields into text its own parser reads back."""

from __future__ import annotations

import html.parser
import json
import xml.etree.ElementTree as ET

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_gym.core.formats import (
    RENDERERS,
    render_html,
    render_json,
    render_key_value,
    render_markdown,
    render_xml,
    render_yaml,
)

FIELDS = [
    ("instruction", 'Click on the "OK" button: now'),
    ("title", "yes"),
    ("page", [{"ref": 1, "tag": "div", "children": [{"ref": 2, "tag": "button", "text": "OK"}]}]),
    ("count", 3),
    ("flag", False),
    ("empty", []),
    ("nothing", None),
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=20))
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True), children, max_size=4),
    ),
    max_leaves=12,
)
field_lists = st.lists(
    st.tuples(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), json_like),
    max_size=4,
    unique_by=lambda kv: kv[0],
)


def test_json_renders_parseable_ordered_json() -> None:
    text = render_json(FIELDS)
    assert list(json.loads(text)) == [k for k, _ in FIELDS]
    assert json.loads(text) == dict(FIELDS)


@settings(max_examples=200, deadline=None)
@given(field_lists)
def test_yaml_reads_back_to_the_same_data(fields) -> None:
    text = render_yaml(fields)
    loaded = yaml.safe_load(text) if text else None
    assert (loaded or {}) == dict(fields)


def test_yaml_quotes_what_would_change_type() -> None:
    assert yaml.safe_load(render_yaml(FIELDS)) == dict(FIELDS)


@settings(max_examples=200, deadline=None)
@given(field_lists)
def test_xml_is_well_formed(fields) -> None:
    root = ET.fromstring(render_xml(fields))
    # A name that is no XML tag (or starts with "xml", which XML reserves) becomes
    # <field name="...">: the name survives either way.
    assert [child.get("name", child.tag) for child in root] == [k for k, _ in fields]


def test_html_is_balanced_and_has_a_section_per_field() -> None:
    text = render_html(FIELDS)

    class Counter(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0
            self.sections: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.depth += 1
            if tag == "section":
                self.sections.append(dict(attrs)["data-field"])

        def handle_endtag(self, tag):
            self.depth -= 1

    parser = Counter()
    parser.feed(text)
    assert parser.depth == 0
    assert parser.sections == [k for k, _ in FIELDS]


def test_markdown_and_key_value_show_every_field_in_order() -> None:
    md = render_markdown(FIELDS)
    heads = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert heads == [k for k, _ in FIELDS]
    kv = render_key_value(FIELDS)
    assert "page[0].children[0].text = OK" in kv
    assert kv.index("instruction =") < kv.index("title =") < kv.index("page[0]")


@settings(max_examples=100, deadline=None)
@given(field_lists)
def test_every_renderer_is_total_and_deterministic(fields) -> None:
    for render in RENDERERS.values():
        assert render(fields) == render(list(fields))
        assert isinstance(render(fields), str)


def test_field_order_changes_the_text_but_not_the_content() -> None:
    reversed_fields = FIELDS[::-1]
    for name, render in RENDERERS.items():
        assert render(FIELDS) != render(reversed_fields), name
    assert json.loads(render_json(FIELDS)) == json.loads(render_json(reversed_fields))
