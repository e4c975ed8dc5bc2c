"""XML escaping, as :mod:`xml.sax.saxutils` does it, without importing that module.

``xml.sax.saxutils`` imports ``urllib.request`` (and with it ``http.client`` and ``ssl``) at
import time, which cost about as much as the rest of ``import harness_gym`` together
(``benchmarks/import_time.py``). These two functions are its ``escape`` and ``quoteattr`` with
no extra entities; ``tests/test_xml_text.py`` checks them against it.
"""

from __future__ import annotations


def escape(data: str) -> str:
    """Escape ``&``, ``>`` and ``<`` (``xml.sax.saxutils.escape``)."""
    return data.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(data: str) -> str:
    """Escape and quote an attribute value (``xml.sax.saxutils.quoteattr``)."""
    data = escape(data).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in data:
        return f'"{data}"'
    if "'" not in data:
        return f"'{data}'"
    return '"{}"'.format(data.replace('"', "&quot;"))
