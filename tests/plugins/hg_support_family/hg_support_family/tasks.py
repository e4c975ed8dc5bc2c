"""SupportRefund: a simulated customer wants a refund; find the order, refund the right amount."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_gym import Action, ActionSpec, Param, StepResult, Task

REASONS = ("damaged", "late", "wrong_item")


class SupportRefund(Task):
    task_id = "SupportRefund"
    description = "Ask the customer for their order, then refund it with the right reason."
    family = "support"
    field_names = ("conversation", "orders")
    action_specs = (
        ActionSpec("ask", "Ask the customer something.", (Param("question", "str", "What to ask."),)),
        ActionSpec(
            "refund",
            "Refund an order.",
            (
                Param("order", "int", "The order number."),
                Param("amount", "float", "How much to refund."),
                Param("reason", "str", "Why.", choices=REASONS),
                Param("items", "list[str]", "The items refunded."),
            ),
        ),
    )
    max_steps = 4

    def reset(self, rng: np.random.Generator) -> None:
        self.orders = {
            int(n): round(float(rng.integers(100, 9999)) / 100, 2)
            for n in rng.choice(900, 3, replace=False) + 100
        }
        self.items = {n: ["mug", "lamp", "scarf"][i] for i, n in enumerate(self.orders)}
        self.order = int(list(self.orders)[int(rng.integers(3))])
        self.reason = REASONS[int(rng.integers(len(REASONS)))]
        self.conversation = ["customer: I want my money back."]
        self.told = False
        self.done = self.won = False

    def fields(self) -> dict[str, Any]:
        return {
            "conversation": list(self.conversation),
            "orders": {str(k): v for k, v in self.orders.items()},
        }

    def legal_actions(self) -> list[Action]:
        if self.done:
            return []
        refunds = [
            Action.of("refund", order=n, amount=self.orders[n], reason=r, items=(self.items[n],))
            for n in self.orders
            for r in REASONS
        ]
        return [Action.of("ask", question="Which order, and what went wrong?"), *refunds]

    def check(self, action: Action) -> str | None:
        if action.name == "refund" and action["order"] not in self.orders:
            return f"no order {action['order']}"
        return None

    def step(self, action: Action) -> StepResult:
        if action.name == "ask":  # the simulated user answers from the true state
            self.told = True
            self.conversation += [
                f"agent: {action['question']}",
                f"customer: order {self.order}, it was {self.reason}.",
            ]
            return StepResult(reward=0.0, terminated=False, success=False)
        self.done = True
        self.won = (action["order"], action["amount"], action["reason"], action["items"]) == (
            self.order, self.orders[self.order], self.reason, (self.items[self.order],)
        )  # fmt: skip
        return StepResult(reward=float(self.won), terminated=True, success=self.won)

    def oracle(self) -> Action:
        if not self.told:
            return Action.of("ask", question="Which order, and what went wrong?")
        n = self.order
        return Action.of("refund", order=n, amount=self.orders[n], reason=self.reason, items=(self.items[n],))

    def state(self) -> dict[str, Any]:
        return {"orders": self.orders, "order": self.order, "reason": self.reason, "told": self.told,
                "conversation": self.conversation, "done": self.done, "won": self.won}  # fmt: skip
