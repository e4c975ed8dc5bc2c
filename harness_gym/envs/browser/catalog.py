"""Which real MiniWoB++ tasks are registered, and why the others are left out.

A task is registered when the canonical actions (``click``, ``type``, ``press``, ``select``)
can solve it and the fields carry what it asks about. Each becomes a :class:`BrowserTask`
subclass named ``Browser<CamelCase>`` (``click-tab-2-easy`` -> ``BrowserClickTab2Easy``),
registered as ``harness_gym/Browser<Task>-<Preset>-v0`` by :func:`harness_gym.envs.browser.register`.

This module is data (and the id rule) only, so that ``import harness_gym`` registers every
real task's ids without importing the tasks: :mod:`harness_gym.envs.browser.tasks` makes the
classes when one is first needed.
"""

from __future__ import annotations

#: MiniWoB++ tasks registered here, with their step budget.
INCLUDED: dict[str, int] = {
    # clicking
    "click-test": 3,
    "click-test-2": 3,
    "click-test-transfer": 3,
    "click-button": 3,
    "click-button-sequence": 4,
    "button-delay": 8,
    "click-link": 3,
    "click-dialog": 3,
    "click-dialog-2": 3,
    "click-option": 4,
    "click-checkboxes": 10,
    "click-checkboxes-large": 16,
    "click-checkboxes-soft": 12,
    "click-checkboxes-transfer": 10,
    "click-collapsible": 4,
    "click-collapsible-nodelay": 4,
    "click-collapsible-2": 8,
    "click-collapsible-2-nodelay": 8,
    "click-tab": 3,
    "click-tab-2": 8,
    "click-tab-2-easy": 8,
    "click-tab-2-medium": 8,
    "click-tab-2-hard": 10,
    "click-menu": 6,
    "click-menu-2": 6,
    "click-pie": 6,
    "click-pie-nodelay": 6,
    "click-widget": 3,
    "unicode-test": 3,
    "navigate-tree": 10,
    "focus-text": 3,
    "focus-text-2": 3,
    "ascending-numbers": 8,
    "buy-ticket": 4,
    "find-greatest": 10,
    "generate-number": 10,
    "odd-or-even": 12,
    "phone-book": 10,
    "social-media": 6,
    "social-media-all": 15,
    "social-media-some": 15,
    "tic-tac-toe": 10,
    "identify-shape": 3,
    "click-shape": 3,
    "scroll-text-2": 15,
    "use-slider": 20,
    "use-slider-2": 30,
    "form-sequence": 15,
    "count-shape": 3,
    "choose-date": 12,
    "choose-date-easy": 12,
    "choose-date-medium": 12,
    "choose-date-nodelay": 12,
    # typing
    "enter-text": 4,
    "enter-text-2": 4,
    "enter-text-dynamic": 4,
    "enter-password": 5,
    "login-user": 6,
    "login-user-popup": 8,
    "copy-paste": 4,
    "copy-paste-2": 4,
    "find-word": 4,
    "scroll-text": 4,
    "read-table": 4,
    "read-table-2": 8,
    "simple-arithmetic": 4,
    "visual-addition": 4,
    "enter-date": 4,
    "enter-time": 4,
    "simple-algebra": 4,
    "text-transform": 4,
    "guess-number": 12,
    "terminal": 10,
    "search-engine": 10,
    "use-autocomplete": 6,
    "use-autocomplete-nodelay": 6,
    "use-spinner": 10,
    "sign-agreement": 5,
    "form-sequence-2": 6,
    "form-sequence-3": 6,
    "multi-layouts": 10,
    "multi-orderings": 10,
    "order-food": 20,
    # drop-down lists
    "choose-list": 4,
    # composite
    "email-inbox": 10,
    "email-inbox-delete": 8,
    "email-inbox-forward": 10,
    "email-inbox-forward-nl": 10,
    "email-inbox-forward-nl-turk": 10,
    "email-inbox-important": 8,
    "email-inbox-nl-turk": 10,
    "email-inbox-noscroll": 10,
    "email-inbox-reply": 10,
    "email-inbox-star-reply": 10,
    "book-flight": 20,
    "book-flight-nodelay": 20,
}

#: Why the tasks whose answer is only in the pixels stay out although ``screenshots=True``
#: shows it (their buttons and cells are elements, so ``click`` suffices): an agent that reads
#: pixels could solve them, but no scripted oracle does, and a registered task needs one that
#: solves it from what the agent sees.
PIXELS_NOTE = (
    "with screenshots=True an agent that reads pixels could solve it with the existing click, "
    "but it is not registered: no scripted oracle solves it from pixels yet"
)

#: MiniWoB++ tasks the package ships that are not registered, and why.
EXCLUDED: dict[str, str] = {
    **dict.fromkeys(
        [
            "drag-box",
            "drag-circle",
            "drag-cube",
            "drag-items",
            "drag-items-grid",
            "drag-shapes",
            "drag-shapes-2",
            "drag-single-shape",
            "drag-sort-numbers",
            "daily-calendar",
            "resize-textarea",
            "draw-circle",
            "draw-line",
        ],
        "needs dragging the mouse (no canonical action drags)",
    ),
    **dict.fromkeys(
        ["highlight-text", "highlight-text-2", "text-editor"],
        "needs selecting a text range with the mouse",
    ),
    **dict.fromkeys(
        ["hover-shape", "chase-circle", "moving-items", "hot-cold"],
        "needs moving or holding the mouse over moving or unmarked targets",
    ),
    **dict.fromkeys(
        [
            "bisect-angle",
            "circle-center",
            "find-midpoint",
            "right-angle",
            "grid-coordinate",
            "use-colorwheel",
            "use-colorwheel-2",
        ],
        "needs clicking at computed coordinates, not on an element",
    ),
    **dict.fromkeys(
        [
            "click-color",
            "click-shades",
        ],
        "for text-only agents: the colours are in inline CSS (style), which the fields do not carry; "
        + PIXELS_NOTE,
    ),
    "count-sides": (
        "for text-only agents: the shape is drawn on a canvas, which has no elements; " + PIXELS_NOTE
    ),
    "number-checkboxes": "needs reading a digit drawn by the layout of checked boxes (positions, not fields)",
    "click-scroll-list": "needs selecting several options of a list with modifier-clicks",
    "simon-says": "needs watching a sequence that the page shows over time",
    "stock-market": (
        "the price ticks every 100 ms and each action runs the clock 1 s, so only every tenth price is "
        "seen and a low enough one may never be"
    ),
}

#: Tasks whose widgets keep state that a new episode in the same document does not reset
#: (a slider's position, a spinner's value, a form step, the open state of form-sequence-3's
#: selectric drop-down, leftovers in book-flight's markup; autocompletes and date pickers are
#: put back, see ``restart`` in :mod:`~harness_gym.envs.browser.dom`):
#: the default ``reuse_page`` still loads a fresh document for them. Found by comparing, after
#: a whole oracle episode in the reused document, its fields and state digest with a fresh
#: page's for the same seeds, and the fields after every step of an episode played alike in
#: both (``tests/test_browser_reuse.py``).
REUSE_INEXACT: frozenset[str] = frozenset(
    {
        # Raphael keeps its running animations in a closure: after some plays (the spreader
        # clicked an even number of times) a stale one stays there and stops its frame loop,
        # so the next episode's pie has no animation timer (issue 42 item 1: found by
        # tests/test_browser_reuse.py's click-pie test after the generic restore).
        "click-pie",
        "click-pie-nodelay",
        "use-slider",
        "use-slider-2",
        "form-sequence",
        "form-sequence-3",
        "copy-paste-2",
        "use-spinner",
        "book-flight",
        "book-flight-nodelay",
    }
)
#: Tasks whose reused document (the default ``reuse_page``) gives the fresh page's instance.
EXACT_REUSE: frozenset[str] = frozenset(INCLUDED) - REUSE_INEXACT


#: Real tasks that have a pure-Python twin in the web suite (real subdomain -> web task id).
TWINS: dict[str, str] = {
    "click-button": "ClickButton",
    "click-link": "ClickLink",
    "click-option": "ClickOption",
    "click-checkboxes": "ClickCheckboxes",
    "enter-text": "EnterText",
    "login-user": "LoginUser",
    "choose-list": "ChooseList",
    "click-tab": "ClickTab",
    "navigate-tree": "NavigateTree",
    "use-autocomplete": "UseAutocomplete",
    "email-inbox": "EmailInbox",
    "book-flight": "BookFlight",
}


def task_id_for(subdomain: str) -> str:
    """``click-tab-2-easy`` -> ``BrowserClickTab2Easy``."""
    return "Browser" + "".join(part[:1].upper() + part[1:] for part in subdomain.split("-"))
