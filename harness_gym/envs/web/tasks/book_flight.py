"""book-flight: search flights by route and date, then book the cheapest or shortest one."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import CITIES, pick

MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def _clock(minutes: int) -> str:
    """A clock time, marked ``+1`` when it falls on the next day."""
    day = " +1" if minutes >= 24 * 60 else ""
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}{day}"


class BookFlight(WebTask):
    task_id = "BookFlight"
    description = "Search for flights on a route and date, then book the cheapest or shortest one."
    max_steps = 10

    def build(self, rng: np.random.Generator) -> None:
        cities = pick(rng, CITIES, int(rng.integers(5, 8)))
        month, first = MONTHS[int(rng.integers(12))], int(rng.integers(1, 22))
        dates = [f"{month} {first + i}" for i in range(int(rng.integers(5, 8)))]
        self.origin, self.destination = cities[0], cities[1]
        self.date = dates[int(rng.integers(len(dates)))]
        self.criterion = "cheapest" if rng.random() < 0.5 else "shortest"
        count = int(rng.integers(3, 7))
        prices = rng.choice(np.arange(80, 900, 5), size=count, replace=False)
        lengths = rng.choice(np.arange(45, 600, 5), size=count, replace=False)
        starts = rng.integers(5 * 12, 22 * 12, size=count) * 5
        self.flights = [
            {"price": int(p), "minutes": int(m), "depart": _clock(int(s)), "arrive": _clock(int(s + m))}
            for p, m, s in zip(prices, lengths, starts, strict=True)
        ]
        key = "price" if self.criterion == "cheapest" else "minutes"
        self.best = min(range(count), key=lambda i: self.flights[i][key])
        self.searched: list[str] = []
        self.title = "Book a flight"
        self.instruction = (
            f"Book the {self.criterion} one-way flight from {self.origin} to {self.destination} "
            f"on {self.date}."
        )
        form = self.page.add("form", attrs={"id": "search"})
        listed = sorted(cities)
        self.page.add("label", "From:", parent=form, attrs={"for": "from"})
        self.from_field = self.page.add("select", parent=form, value="", options=listed, attrs={"id": "from"})
        self.page.add("label", "To:", parent=form, attrs={"for": "to"})
        self.to_field = self.page.add("select", parent=form, value="", options=listed, attrs={"id": "to"})
        self.page.add("label", "Departure date:", parent=form, attrs={"for": "date"})
        self.date_field = self.page.add("select", parent=form, value="", options=dates, attrs={"id": "date"})
        self.search = self.page.add("button", "Search", parent=form)
        self.error = self.page.add("div", parent=form, attrs={"role": "alert"}, visible=False)
        self.results = self.page.add("div", attrs={"id": "results"}, visible=False)
        self.rows: list[Element] = []
        self.books: list[Element] = []
        for flight in self.flights:
            hours, minutes = divmod(flight["minutes"], 60)
            attrs = {
                "depart": flight["depart"],
                "arrive": flight["arrive"],
                "duration": f"{hours}h {minutes}m",
                "price": f"${flight['price']}",
            }
            row = self.page.add("div", parent=self.results, attrs=attrs)
            self.rows.append(row)
            self.books.append(self.page.add("button", "Book", parent=row))

    def _query(self) -> list[str]:
        return [self.from_field.value or "", self.to_field.value or "", self.date_field.value or ""]

    def on_click(self, element: Element) -> None:
        if element is self.search:
            origin, destination, date = self._query()
            if not (origin and destination and date) or origin == destination:
                self.error.text = "Please choose two different cities and a date."
                self.error.visible, self.results.visible = True, False
                self.searched = []
                return
            self.error.visible, self.results.visible = False, True
            self.searched = [origin, destination, date]
            for row in self.rows:
                row.text = f"{origin} to {destination}, {date}"
        elif element.tag == "button" and element.text == "Book":
            index = next(i for i, b in enumerate(self.books) if b is element)
            self.finish(self.searched == self._target() and index == self.best)

    def _target(self) -> list[str]:
        return [self.origin, self.destination, self.date]

    def oracle(self) -> Action:
        if self.results.visible and self.searched == self._target():
            return Action.of("click", ref=self.books[self.best].ref)
        fields = (self.from_field, self.to_field, self.date_field)
        for field, want in zip(fields, self._target(), strict=True):
            if field.value != want:
                return Action.of("select", ref=field.ref, option=want)
        return Action.of("click", ref=self.search.ref)

    def extra_state(self) -> dict[str, Any]:
        return {
            "target": self._target(),
            "criterion": self.criterion,
            "flights": self.flights,
            "best": self.best,
            "searched": self.searched,
        }
