"""login-user: enter the given username and password, then press Login."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import FIRST_NAMES, WORDS, one, pick


class LoginUser(WebTask):
    task_id = "LoginUser"
    description = "Fill in a login form with the given username and password and press Login."
    max_steps = 8

    def build(self, rng: np.random.Generator) -> None:
        names = pick(rng, [n.lower() for n in FIRST_NAMES], 2)
        secrets = pick(rng, WORDS, 2)
        self.username = names[0]
        self.password = f"{secrets[0]}{int(rng.integers(10, 100))}"
        decoy = f"{secrets[1]}{int(rng.integers(10, 100))}"
        self.type_candidates = [self.username, self.password, names[1], decoy]
        rng.shuffle(self.type_candidates)
        self.title = "Login"
        self.instruction = (
            f'Enter the username "{self.username}" and the password "{self.password}" '
            "into the text fields and press login."
        )
        form = self.page.add("form", attrs={"id": "login"})
        placeholders = rng.random() < 0.5
        rows: dict[str, Element] = {}
        order = ["username", "password"] if rng.random() < 0.7 else ["password", "username"]
        for name in order:
            self.page.add("label", name.capitalize(), parent=form, attrs={"for": name})
            attrs = {"id": name, "type": "password" if name == "password" else "text"}
            if placeholders:
                attrs["placeholder"] = name.capitalize()
            rows[name] = self.page.add("input", parent=form, value="", attrs=attrs)
        if rng.random() < 0.3:
            self.page.add("span", f"Forgot your {one(rng, ['password', 'username'])}?", parent=form)
        self.user_field = rows["username"]
        self.pass_field = rows["password"]
        self.login = self.page.add("button", "Login", parent=form)

    def on_click(self, element: Element) -> None:
        if element is self.login:
            self.finish(self.user_field.value == self.username and self.pass_field.value == self.password)

    def oracle(self) -> Action:
        if self.user_field.value != self.username:
            return Action.of("type", ref=self.user_field.ref, text=self.username)
        if self.pass_field.value != self.password:
            return Action.of("type", ref=self.pass_field.ref, text=self.password)
        return Action.of("click", ref=self.login.ref)

    def extra_state(self) -> dict[str, Any]:
        return {"username": self.username, "password": self.password}
