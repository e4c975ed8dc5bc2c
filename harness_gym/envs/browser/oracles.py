"""Scripted oracles for real MiniWoB++ tasks: the live fields in, the next action out.

Each oracle reads only what a policy sees (``instruction`` and ``page``, the visible element
tree) and returns one canonical action, so the same function drives this backend and, through
a converter of its DOM observations, Farama's Selenium environment (see
``benchmarks/browser_throughput.py``). Oracles are stateless: everything they need to know
about progress (a filled field, an open tab, an expanded folder) is on the page.

They let ceilings be measured on real tasks: ``tests/test_browser.py`` checks each one's
success over many seeds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from harness_gym.core.task import Action
from harness_gym.envs.browser.dom import all_text, is_text_input, walk

Node = dict[str, Any]
Fields = dict[str, Any]
Oracle = Callable[[Fields], Action]

ORACLES: dict[str, Oracle] = {}

_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")


def ordinal(instruction: str) -> int:
    """The first ordinal of the instruction ("2nd" -> 1), zero-based."""
    return int(_ORDINAL.search(instruction).group(1)) - 1


class OracleError(RuntimeError):
    """The oracle found nothing sensible to do on this page (a bug or an unexpected page)."""


def oracle(*subdomains: str) -> Callable[[Oracle], Oracle]:
    """Register a function as the scripted oracle of these MiniWoB++ tasks."""

    def wrap(fn: Oracle) -> Oracle:
        for name in subdomains:
            ORACLES[name] = fn
        return fn

    return wrap


# -- helpers ----------------------------------------------------------------------------------


def nodes(fields: Fields) -> list[Node]:
    return list(walk(fields["page"]))


def quoted(instruction: str) -> list[str]:
    return re.findall(r'"([^"]*)"', instruction)


def find(
    fields: Fields | Iterable[Node],
    *,
    tag: str | None = None,
    text: str | None = None,
    cls: str | None = None,
    pred: Callable[[Node], bool] | None = None,
) -> Node | None:
    """The first visible element matching every given condition (text compared exactly)."""
    pool = nodes(fields) if isinstance(fields, dict) else fields
    for node in pool:
        if tag is not None and node["tag"] != tag:
            continue
        if text is not None and node.get("text") != text:
            continue
        if cls is not None and cls not in node.get("class", "").split():
            continue
        if pred is not None and not pred(node):
            continue
        return node
    return None


def need(node: Node | None, what: str) -> Node:
    if node is None:
        raise OracleError(f"no {what} on the page")
    return node


def click(node: Node) -> Action:
    return Action.of("click", ref=node["ref"])


def type_into(node: Node, text: str) -> Action:
    return Action.of("type", ref=node["ref"], text=text)


def submit(fields: Fields, label: str = "submit") -> Action:
    """Click the button labelled ``label`` (case-insensitive) or, failing that, ``#subbtn``."""
    button = find(fields, pred=lambda n: n["tag"] == "button" and n.get("text", "").lower() == label.lower())
    button = button or find(fields, pred=lambda n: n.get("id") == "subbtn")
    return click(need(button, f"{label!r} button"))


def fill_then_submit(fields: Fields, pairs: list[tuple[Node, str]], label: str = "submit") -> Action:
    """Type each value into its field unless it is already there, then submit."""
    for node, value in pairs:
        if node.get("value") != value:
            return type_into(node, value)
    return submit(fields, label)


def inputs(fields: Fields) -> list[Node]:
    return [n for n in nodes(fields) if is_text_input(n)]


# -- click tasks ------------------------------------------------------------------------------


@oracle("click-test")
def click_test(fields: Fields) -> Action:
    return click(need(find(fields, tag="button"), "button"))


@oracle("click-test-2", "click-test-transfer")
def click_test_2(fields: Fields) -> Action:
    label = re.search(r"button (\w+)", fields["instruction"]).group(1)
    return click(need(find(fields, tag="button", text=label), f"button {label}"))


@oracle("click-button-sequence")
def click_button_sequence(fields: Fields) -> Action:
    one = need(find(fields, tag="button", text="ONE"), "button ONE")
    if one.get("focused"):  # ONE was clicked (a click focuses the button): now TWO
        return click(need(find(fields, tag="button", text="TWO"), "button TWO"))
    return click(one)


@oracle("click-button", "unicode-test")
def click_button(fields: Fields) -> Action:
    label = quoted(fields["instruction"])[0]
    return click(need(find(fields, tag="button", text=label), f"button {label!r}"))


@oracle("click-link")
def click_link(fields: Fields) -> Action:
    label = quoted(fields["instruction"])[0]
    return click(need(find(fields, text=label, cls="alink"), f"link {label!r}"))


@oracle("click-dialog")
def click_dialog(fields: Fields) -> Action:
    return click(need(find(fields, cls="ui-dialog-titlebar-close"), "dialog close button"))


@oracle("click-dialog-2")
def click_dialog_2(fields: Fields) -> Action:
    label = quoted(fields["instruction"])[0]
    if label.lower() == "x":
        return click_dialog(fields)
    return click(need(find(fields, tag="button", text=label), f"dialog button {label!r}"))


@oracle("focus-text")
def focus_text(fields: Fields) -> Action:
    return click(need(find(fields, tag="input"), "text box"))


@oracle("focus-text-2")
def focus_text_2(fields: Fields) -> Action:
    return click(inputs(fields)[ordinal(fields["instruction"])])


@oracle("click-option")
def click_option(fields: Fields) -> Action:
    target = re.match(r"Select (.*) and click Submit\.", fields["instruction"]).group(1)
    label = need(find(fields, tag="label", text=target), f"option {target!r}")
    radio = need(find(label.get("children", ()), tag="input"), "radio button")
    if not radio.get("checked"):
        return click(radio)
    return submit(fields)


@oracle("click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer")
def click_checkboxes(fields: Fields) -> Action:
    listed = re.match(r"Select (.*) and click Submit\.", fields["instruction"]).group(1)
    wanted = set() if listed == "nothing" else {w.strip() for w in listed.split(",")}
    for label in nodes(fields):
        if label["tag"] != "label":
            continue
        box = find(label.get("children", ()), tag="input")
        if box is not None and bool(box.get("checked")) != (label.get("text") in wanted):
            return click(box)
    return submit(fields)


@oracle("click-collapsible", "click-collapsible-nodelay")
def click_collapsible(fields: Fields) -> Action:
    if find(fields, cls="ui-accordion-content") is None:
        return click(need(find(fields, tag="h3"), "section header"))
    return submit(fields)


def _find_link_or_open_next(fields: Fields, opener_tag: str, active: Callable[[Node], bool]) -> Action:
    """Click the quoted link if visible; else open the section after the open one."""
    label = quoted(fields["instruction"])[0]
    link = find(fields, text=label, cls="alink")
    if link is not None:
        return click(link)
    openers = [n for n in nodes(fields) if n["tag"] == opener_tag]
    current = next((i for i, n in enumerate(openers) if active(n)), -1)
    return click(openers[(current + 1) % len(openers)])


@oracle("click-collapsible-2", "click-collapsible-2-nodelay")
def click_collapsible_2(fields: Fields) -> Action:
    return _find_link_or_open_next(
        fields, "h3", lambda n: "ui-accordion-header-active" in n.get("class", "").split()
    )


@oracle("click-tab")
def click_tab(fields: Fields) -> Action:
    number = re.search(r"Tab #(\d+)", fields["instruction"]).group(1)
    return click(need(find(fields, tag="a", text=f"Tab #{number}"), f"tab #{number}"))


@oracle("click-tab-2", "click-tab-2-easy", "click-tab-2-medium", "click-tab-2-hard")
def click_tab_2(fields: Fields) -> Action:
    tabs = [n for n in nodes(fields) if n["tag"] == "li" and n.get("role") == "tab"]
    label = quoted(fields["instruction"])[0]
    link = find(fields, text=label, cls="alink")
    if link is not None:
        return click(link)
    current = next((i for i, n in enumerate(tabs) if n.get("aria-selected") == "true"), -1)
    anchor = need(find(tabs[(current + 1) % len(tabs)].get("children", ()), tag="a"), "tab")
    return click(anchor)


@oracle("navigate-tree")
def navigate_tree(fields: Fields) -> Action:
    label = quoted(fields["instruction"])[0]
    target = find(fields, text=label, pred=lambda n: n["tag"] == "span")
    if target is not None:
        return click(target)
    for item in nodes(fields):
        if item["tag"] == "li" and "expandable" in item.get("class", "").split():
            folder = find(item.get("children", ()), tag="span")
            if folder is not None:
                return click(folder)
    raise OracleError(f"no folder left to open and no {label!r}")


# -- typing tasks -----------------------------------------------------------------------------


@oracle("enter-text", "enter-text-dynamic")
def enter_text(fields: Fields) -> Action:
    text = quoted(fields["instruction"])[0]
    return fill_then_submit(fields, [(inputs(fields)[0], text)])


@oracle("enter-text-2")
def enter_text_2(fields: Fields) -> Action:
    text = quoted(fields["instruction"])[0]
    text = text.lower() if "lower case" in fields["instruction"] else text.upper()
    return fill_then_submit(fields, [(inputs(fields)[0], text)])


@oracle("enter-password")
def enter_password(fields: Fields) -> Action:
    password = quoted(fields["instruction"])[0]
    return fill_then_submit(fields, [(field, password) for field in inputs(fields)])


@oracle("login-user", "login-user-popup")
def login_user(fields: Fields) -> Action:
    popup = find(fields, pred=lambda n: n.get("id") == "popup")
    if popup is not None:
        return click(need(find(walk([popup]), tag="button", text="Cancel"), "popup Cancel"))
    username, password = quoted(fields["instruction"])[:2]
    user = need(find(fields, pred=lambda n: n.get("id") == "username"), "username field")
    pw = need(find(fields, pred=lambda n: n.get("id") == "password"), "password field")
    return fill_then_submit(fields, [(user, username), (pw, password)], label="login")


@oracle("copy-paste")
def copy_paste(fields: Fields) -> Action:
    source = need(find(fields, tag="textarea"), "text area")
    return fill_then_submit(fields, [(need(find(fields, tag="input"), "text box"), source["value"])])


@oracle("find-word")
def find_word(fields: Fields) -> Action:
    paragraph = need(find(fields, tag="p"), "paragraph")
    word = all_text(paragraph).split()[ordinal(fields["instruction"])]
    return fill_then_submit(fields, [(need(find(fields, tag="input"), "text box"), word)])


@oracle("choose-list")
def choose_list(fields: Fields) -> Action:
    target = re.match(r"Select (.*) from the list and click Submit\.", fields["instruction"]).group(1)
    menu = need(find(fields, tag="select"), "drop-down list")
    if menu.get("value") != target:
        return Action.of("select", ref=menu["ref"], option=target)
    return submit(fields)


@oracle("use-autocomplete", "use-autocomplete-nodelay")
def use_autocomplete(fields: Fields) -> Action:
    parts = quoted(fields["instruction"])
    start, end = parts[0], parts[1] if len(parts) > 1 else ""
    box = need(find(fields, tag="input"), "text box")
    value = box.get("value", "")
    if value.startswith(start) and value.endswith(end):  # all the task checks
        return submit(fields)
    choice = find(
        fields,
        pred=lambda n: (
            "ui-menu-item-wrapper" in n.get("class", "")
            and n.get("text", "").startswith(start)
            and n.get("text", "").endswith(end)
        ),
    )
    if choice is not None:
        return click(choice)
    return type_into(box, start)


@oracle("simple-arithmetic")
def simple_arithmetic(fields: Fields) -> Action:
    problem = need(find(fields, pred=lambda n: n.get("id") == "math-problem"), "math problem")
    a, op, b = re.match(r"(-?\d+)\s*([-+x*/])\s*(-?\d+)", all_text(problem)).groups()
    x, y = int(a), int(b)
    answer = {"+": x + y, "-": x - y, "x": x * y, "*": x * y, "/": x // y if y else 0}[op]
    return fill_then_submit(fields, [(need(find(fields, tag="input"), "answer box"), str(answer))])


# -- shapes, blocks, date and time fields, scrolling, sliders ------------------------------------

#: What MiniWoB's shapes library draws each kind of shape as (``common/shapes.js``).
_SHAPE_TAGS = {"rect": "rectangle", "circle": "circle", "polygon": "triangle"}
_SHAPE_COLORS = ("red", "green", "blue", "aqua", "black", "magenta", "yellow")


def _shapes(fields: Fields) -> list[Node]:
    """The drawn items of a shapes task: SVG text (letters, digits) and shapes, in the grid."""
    svg = need(find(fields, tag="svg"), "drawing")
    return [n for n in walk(svg.get("children", ())) if n["tag"] in ("text", *_SHAPE_TAGS)]


def _shape_kind(node: Node) -> tuple[str, str]:
    """(type, text) as ``shapes.js`` names them: ("letter", "q"), ("shape", "circle"), ..."""
    if node["tag"] == "text":
        text = node.get("text", "")
        return ("digit" if text.isdigit() else "letter"), text
    return "shape", _SHAPE_TAGS[node["tag"]]


def _shape_is_large(node: Node) -> bool:
    """``shapes.js`` draws a large item 20 px across (font size, side, diameter), a small one 10."""
    if node["tag"] == "text":
        extent = float(node.get("font-size", "0").removesuffix("px"))
    elif node["tag"] == "rect":
        extent = float(node.get("width", 0))
    elif node["tag"] == "circle":
        extent = 2 * float(node.get("r", 0))
    else:
        xs = [float(p.split(",")[0]) for p in node.get("points", "").split()]
        extent = max(xs) - min(xs) if xs else 0.0
    return extent > 15


@oracle("identify-shape")
def identify_shape(fields: Fields) -> Action:
    kind, text = _shape_kind(need(next(iter(_shapes(fields)), None), "figure"))
    label = {"letter": "Letter", "digit": "Number"}.get(kind) or text.capitalize()
    return click(need(find(fields, tag="button", text=label), f"button {label!r}"))


def _matching_shapes(fields: Fields, description: str) -> list[Node]:
    """The items that ``shapes.shapeMatchesText`` accepts for a description such as "large red
    circle", "small item" or "blue q": an optional size, an optional colour, then what."""
    words = description.split()
    size = words.pop(0) if words[0] in ("large", "small") else ""
    color = words.pop(0) if len(words) > 1 and words[0] in _SHAPE_COLORS else ""
    what = " ".join(words)
    found = []
    for node in _shapes(fields):
        kind, text = _shape_kind(node)
        if size and ("large" if _shape_is_large(node) else "small") != size:
            continue
        if color and node.get("fill") != color:
            continue
        if what in ("item", kind, text):
            found.append(node)
    return found


@oracle("click-shape")
def click_shape(fields: Fields) -> Action:
    description = re.match(r"Click on an? (.+)", fields["instruction"]).group(1)
    return click(need(next(iter(_matching_shapes(fields, description)), None), f"{description!r}"))


@oracle("count-shape")
def count_shape(fields: Fields) -> Action:
    description = re.match(r"How many (.+)s are there\?", fields["instruction"]).group(1)
    count = str(len(_matching_shapes(fields, description)))
    return click(need(find(fields, tag="button", text=count), f"button {count}"))


@oracle("visual-addition")
def visual_addition(fields: Fields) -> Action:
    def blocks(element_id: str) -> int:
        group = need(find(fields, pred=lambda n: n.get("id") == element_id), element_id)
        return sum(1 for n in walk(group.get("children", ())) if "addition-block" in n.get("class", ""))

    answer = str(blocks("visual-1") + blocks("visual-2"))
    return fill_then_submit(fields, [(need(find(fields, tag="input"), "answer box"), answer)])


@oracle("enter-date")
def enter_date(fields: Fields) -> Action:
    month, day, year = re.search(r"(\d\d)/(\d\d)/(\d{4})", fields["instruction"]).groups()
    box = need(find(fields, tag="input"), "date field")
    if box.get("value") != f"{year}-{month}-{day}":  # what a date field holds
        return type_into(box, f"{month}/{day}/{year}")
    return submit(fields)


@oracle("enter-time")
def enter_time(fields: Fields) -> Action:
    hour, minute, half = re.search(r"(\d+):(\d\d) ([AP]M)", fields["instruction"]).groups()
    h24 = int(hour) % 12 + (12 if half == "PM" else 0)
    box = need(find(fields, tag="input"), "time field")
    if box.get("value") != f"{h24:02d}:{minute}":  # what a time field holds
        return type_into(box, f"{int(hour):02d}{minute}{half}")  # hour, minute, AM/PM segments
    return submit(fields)


@oracle("scroll-text-2")
def scroll_text_2(fields: Fields) -> Action:
    goal = re.search(r"to the (top|bottom)", fields["instruction"]).group(1)
    area = need(find(fields, tag="textarea"), "text area")
    if area.get("scrolled", goal) == goal:
        return submit(fields)
    if not area.get("focused"):
        return click(area)
    return Action.of("press", key="PageDown" if goal == "bottom" else "PageUp")


def _slide(fields: Fields, slider_id: str, value_id: str, goal: int, page_over: int) -> Action | None:
    """The next action that moves a jQuery UI slider to ``goal``, None once it is there.

    Focus the handle, then PageUp/PageDown (a fifth of the range) while more than
    ``page_over`` away, then arrows (1 each). The range is not on the page, so the oracle does
    not use Home/End; ``page_over`` (at least a page, so pages never overshoot back and forth)
    comes from the task's ranges."""
    value = int(need(find(fields, pred=lambda n: n.get("id") == value_id), value_id)["text"])
    if value == goal:
        return None
    slider = need(find(fields, pred=lambda n: n.get("id") == slider_id), slider_id)
    handle = need(find(walk([slider]), cls="ui-slider-handle"), "slider handle")
    if not handle.get("focused"):
        return click(handle)
    up = goal > value
    if abs(goal - value) > page_over:
        return Action.of("press", key="PageUp" if up else "PageDown")
    return Action.of("press", key="ArrowUp" if up else "ArrowDown")


@oracle("use-slider")
def use_slider(fields: Fields) -> Action:
    """Ranges of 5 to 100 (pages of 1 to 20): at most 5 pages and 10 arrows."""
    goal = int(re.search(r"Select (-?\d+) with the slider", fields["instruction"]).group(1))
    return _slide(fields, "slider", "val", goal, 10) or submit(fields)


@oracle("use-slider-2")
def use_slider_2(fields: Fields) -> Action:
    """Three sliders of 0-20 (pages of 4): at most 5 pages and 2 arrows each."""
    goals = json.loads(re.search(r"combination (\[[-\d, ]+\])", fields["instruction"]).group(1))
    for i, goal in enumerate(goals, start=1):
        action = _slide(fields, f"slider-{i}", f"val-{i}", goal, 2)
        if action is not None:
            return action
    return submit(fields)


@oracle("form-sequence")
def form_sequence(fields: Fields) -> Action:
    """A slider of -10 to 10 (pages of 4), then one check box of three."""
    goal = int(re.search(r"Select (-?\d+) with the slider", fields["instruction"]).group(1))
    action = _slide(fields, "slider", "val", goal, 2)
    if action is not None:
        return action
    wanted = ordinal(fields["instruction"]) + 1
    for i in (1, 2, 3):
        box = need(find(fields, pred=lambda n, i=i: n.get("id") == f"checkbox-{i}"), f"check box {i}")
        if bool(box.get("checked")) != (i == wanted):
            return click(box)
    return submit(fields)


__all__ = ["ORACLES", "OracleError", "oracle"]


# -- email inbox --------------------------------------------------------------------------------


def _by_id(fields: Fields, element_id: str) -> Node | None:
    return find(fields, pred=lambda n: n.get("id") == element_id)


@oracle(
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward",
    "email-inbox-important",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
)
def email_inbox(fields: Fields) -> Action:
    """Open the sender's email, then reply, forward, delete or star it.

    Total over what play can leave on the page (``harness-gym validate``'s random floor asks
    the oracle at every step): a reply or forward form the task does not want (or a reply to
    someone else) is closed, another sender's email is left by the back arrow, and the search
    view (which hides the inbox) is cancelled, as a user would, instead of raising."""
    instruction = fields["instruction"]
    sender, rest = re.match(r"Find the email by (.+?) and (.*)", instruction).groups()
    reply = _by_id(fields, "reply")
    if reply is not None:
        to = find(walk([reply]), cls="reply-sender")
        if "reply" not in rest or to is None or to.get("text") != sender:
            return click(need(_by_id(fields, "close-reply"), "reply's close button"))
        text = quoted(instruction)[0]
        box = need(find(walk([reply]), tag="textarea"), "reply text")
        if box.get("value") != text:
            return type_into(box, text)
        return click(need(_by_id(fields, "send-reply"), "send button"))
    forward = _by_id(fields, "forward")
    if forward is not None:
        if "forward" not in rest:
            return click(need(_by_id(fields, "close-forward"), "forward's close button"))
        to = re.search(r"forward that email to (.+?)\.?$", instruction).group(1)
        box = need(find(walk([forward]), cls="forward-sender"), "forward address")
        if box.get("value") != to:
            return type_into(box, to)
        return click(need(_by_id(fields, "send-forward"), "send button"))
    email = _by_id(fields, "email")
    if email is not None:
        shown = find(walk([email]), cls="email-sender")
        if shown is None or shown.get("text") != sender:
            return click(need(_by_id(fields, "close-email"), "back arrow"))
        if "reply" in rest:
            return click(need(find(walk([email]), cls="email-reply"), "reply button"))
        if "forward" in rest:
            return click(need(find(walk([email]), cls="email-forward"), "forward button"))
        icon = "trash" if "trash" in rest or "delete" in rest else "star"
        return click(need(find(walk([email]), cls=icon), f"{icon} icon"))
    thread = find(fields, cls="email-sender", text=sender)
    if thread is None and _by_id(fields, "search-cancel") is not None:  # the search view hides the inbox
        return click(need(_by_id(fields, "search-cancel"), "search's back arrow"))
    return click(need(thread, f"email from {sender}"))


# -- book flight --------------------------------------------------------------------------------

_MONTHS = "January February March April May June July August September October November December".split()


def _minutes(text: str) -> int:
    """ "2h 5m" -> 125."""
    hours = re.search(r"(\d+)h", text)
    minutes = re.search(r"(\d+)m", text)
    return (int(hours.group(1)) * 60 if hours else 0) + (int(minutes.group(1)) if minutes else 0)


def _pick_airport(fields: Fields, box: Node, query: str) -> Action | None:
    """Type ``query`` and pick the suggestion that contains it; None once the box holds one."""
    value = box.get("value", "")
    if query in value and value != query:
        return None
    for item in nodes(fields):
        if "ui-menu-item-wrapper" in item.get("class", "") and query in item.get("text", ""):
            return click(item)
    return type_into(box, query)


def _pick_date(fields: Fields, box: Node, month: int, day: int, year: int) -> Action | None:
    """Open the date picker, page to the month and click the day; None once the date is set."""
    if box.get("value") == f"{month:02d}/{day:02d}/{year}":
        return None
    picker = find(fields, pred=lambda n: n.get("id") == "ui-datepicker-div")
    if picker is None:
        return click(box)
    inside = list(walk([picker]))
    shown_month = _MONTHS.index(need(find(inside, cls="ui-datepicker-month"), "month")["text"]) + 1
    shown_year = int(need(find(inside, cls="ui-datepicker-year"), "year")["text"])
    delta = (year - shown_year) * 12 + (month - shown_month)
    if delta:
        arrow = "ui-datepicker-next" if delta > 0 else "ui-datepicker-prev"
        return click(need(find(inside, cls=arrow), arrow))
    cell = find(inside, tag="a", text=str(day), pred=lambda n: "ui-state-default" in n.get("class", ""))
    return click(need(cell, f"day {day}"))


@oracle("book-flight", "book-flight-nodelay")
def book_flight(fields: Fields) -> Action:
    instruction = fields["instruction"]
    goal, origin, destination, month, day, year = re.match(
        r"Book the (\w+) one-way flight from: (.+?) to: (.+?) on (\d+)/(\d+)/(\d+)\.", instruction
    ).groups()
    flights = [n for n in nodes(fields) if "flight" in n.get("class", "").split()]
    if flights:

        def score(flight: Node) -> int:
            inside = list(walk([flight]))
            if goal == "cheapest":
                price = need(find(inside, cls="flight-price"), "price")
                return int(re.sub(r"[^\d]", "", all_text(price)) or 0)
            return _minutes(all_text(need(find(inside, cls="time-duration"), "duration")))

        best = min(flights, key=score)
        button = find(walk([best]), tag="button") or need(find(walk([best]), cls="flight-price"), "book")
        return click(button)
    for box_id, query in (("flight-from", origin), ("flight-to", destination)):
        box = need(find(fields, pred=lambda n, i=box_id: n.get("id") == i), box_id)
        action = _pick_airport(fields, box, query)
        if action is not None:
            return action
    date_box = need(find(fields, pred=lambda n: n.get("id") == "datepicker"), "date box")
    action = _pick_date(fields, date_box, int(month), int(day), int(year))
    if action is not None:
        return action
    return click(need(find(fields, pred=lambda n: n.get("id") == "search"), "search button"))
