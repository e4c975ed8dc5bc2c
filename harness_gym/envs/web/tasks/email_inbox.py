"""email-inbox: open the right email in an inbox, then forward, reply to or delete it."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym.core.task import Action
from harness_gym.envs.web.base import WebTask
from harness_gym.envs.web.page import Element
from harness_gym.envs.web.words import FIRST_NAMES, WORDS, one, pick


def _phrase(rng: np.random.Generator, k: int) -> str:
    return " ".join(pick(rng, WORDS, k))


class EmailInbox(WebTask):
    task_id = "EmailInbox"
    description = "Find an email by its sender, then forward it, reply to it or delete it."
    max_steps = 10

    def build(self, rng: np.random.Generator) -> None:
        count = int(rng.integers(3, 7))
        people = pick(rng, FIRST_NAMES, count + 3)
        senders, strangers = people[:count], people[count:]
        self.emails = [
            {"sender": s, "subject": _phrase(rng, 2).capitalize(), "body": _phrase(rng, 6).capitalize() + "."}
            for s in senders
        ]
        self.target = int(rng.integers(count))
        self.goal = one(rng, ["forward", "reply", "delete"])
        sender = senders[self.target]
        texts = [_phrase(rng, int(rng.integers(1, 4))) for _ in range(3)]
        self.recipient = strangers[0] if self.goal == "forward" else ""
        self.reply = texts[0] if self.goal == "reply" else ""
        if self.goal == "forward":
            self.instruction = f"Find the email by {sender} and forward that email to {self.recipient}."
        elif self.goal == "reply":
            self.instruction = f'Find the email by {sender} and reply to them with the text "{texts[0]}".'
        else:
            self.instruction = f"Find the email by {sender} and delete it."
        self.type_candidates = [*strangers, sender, *texts]
        rng.shuffle(self.type_candidates)
        self.title = "Inbox"
        self.opened: int | None = None
        self.mode = ""
        self.inbox = self.page.add("ul", attrs={"id": "inbox"})
        self.rows = [
            self.page.add("li", e["sender"], parent=self.inbox, attrs={"subject": e["subject"]})
            for e in self.emails
        ]
        self.view = self.page.add("div", attrs={"id": "email"}, visible=False)
        self.view_from = self.page.add("div", parent=self.view, attrs={"id": "from"})
        self.view_subject = self.page.add("div", parent=self.view, attrs={"id": "subject"})
        self.view_body = self.page.add("div", parent=self.view, attrs={"id": "body"})
        labels = ["Reply", "Forward", "Delete"]
        buttons = {b: self.page.add("button", b, parent=self.view) for b in pick(rng, labels, 3)}
        self.reply_button, self.forward_button = buttons["Reply"], buttons["Forward"]
        self.delete_button = buttons["Delete"]
        self.view_back = self.page.add("button", "Back", parent=self.view)
        self.compose = self.page.add("form", attrs={"id": "compose"}, visible=False)
        self.page.add("label", "To:", parent=self.compose, attrs={"for": "to"})
        self.to_field = self.page.add("input", parent=self.compose, value="", attrs={"id": "to"})
        self.page.add("label", "Message:", parent=self.compose, attrs={"for": "message"})
        self.body_field = self.page.add("textarea", parent=self.compose, value="", attrs={"id": "message"})
        self.send = self.page.add("button", "Send", parent=self.compose)
        self.cancel = self.page.add("button", "Cancel", parent=self.compose)

    def _show(self, view: Element) -> None:
        for box in (self.inbox, self.view, self.compose):
            box.visible = box is view

    def on_click(self, element: Element) -> None:
        if element.tag == "li":
            self.opened = next(i for i, row in enumerate(self.rows) if row is element)
            email = self.emails[self.opened]
            self.view_from.text = f"From: {email['sender']}"
            self.view_subject.text = f"Subject: {email['subject']}"
            self.view_body.text = email["body"]
            self._show(self.view)
        elif element is self.view_back:
            self._show(self.inbox)
        elif element is self.delete_button:
            self.finish(self.goal == "delete" and self.opened == self.target)
        elif element is self.reply_button or element is self.forward_button:
            assert self.opened is not None
            email = self.emails[self.opened]
            self.mode = "reply" if element is self.reply_button else "forward"
            self.to_field.value = email["sender"] if self.mode == "reply" else ""
            self.body_field.value = "" if self.mode == "reply" else email["body"]
            self._show(self.compose)
        elif element is self.cancel:
            self._show(self.view)
        elif element is self.send:
            self.finish(self._sent_right())

    def _sent_right(self) -> bool:
        if self.goal != self.mode or self.opened != self.target:
            return False
        if self.goal == "forward":
            return self.to_field.value == self.recipient
        sender = self.emails[self.target]["sender"]
        return self.to_field.value == sender and self.body_field.value == self.reply

    def oracle(self) -> Action:
        if self.inbox.visible:
            return Action.of("click", ref=self.rows[self.target].ref)
        if self.view.visible:
            if self.opened != self.target:
                return Action.of("click", ref=self.view_back.ref)
            button = {"forward": self.forward_button, "reply": self.reply_button}.get(self.goal)
            return Action.of("click", ref=(button or self.delete_button).ref)
        if self.mode != self.goal or self.opened != self.target:
            return Action.of("click", ref=self.cancel.ref)
        sender = self.emails[self.target]["sender"]
        to = self.recipient if self.goal == "forward" else sender
        if self.to_field.value != to:
            return Action.of("type", ref=self.to_field.ref, text=to)
        if self.goal == "reply" and self.body_field.value != self.reply:
            return Action.of("type", ref=self.body_field.ref, text=self.reply)
        return Action.of("click", ref=self.send.ref)

    def extra_state(self) -> dict[str, Any]:
        return {
            "emails": self.emails,
            "target": self.target,
            "goal": self.goal,
            "recipient": self.recipient,
            "reply": self.reply,
            "opened": self.opened,
            "mode": self.mode,
        }
