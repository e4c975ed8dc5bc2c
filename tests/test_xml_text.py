"""harness_gym.core.xml_text escapes exactly as xml.sax.saxutils does (without its import cost)."""

from __future__ import annotations

from xml.sax.saxutils import escape as sax_escape
from xml.sax.saxutils import quoteattr as sax_quoteattr

from hypothesis import given
from hypothesis import strategies as st

from harness_gym.core.xml_text import escape, quoteattr

TRICKY = ["", "a<b>&c", 'say "hi"', "it's", "both ' and \"", "tab\tnew\nline\rcr", "&amp; already", "é ✓ 𝄞"]
ALPHABET = st.sampled_from(list("ab<>&\"'\t\n\r é\x00\x1f"))


def test_known_strings_escape_as_saxutils_does() -> None:
    for text in TRICKY:
        assert escape(text) == sax_escape(text)
        assert quoteattr(text) == sax_quoteattr(text)
    assert quoteattr("both ' and \"") == '"both \' and &quot;"'


@given(st.text(ALPHABET, max_size=30) | st.text(max_size=30))
def test_any_string_escapes_as_saxutils_does(text: str) -> None:
    assert escape(text) == sax_escape(text)
    assert quoteattr(text) == sax_quoteattr(text)
