"""Coding tasks: fix a bug in a small package so its unittest suite passes; write a filter
script with a specified command-line and stdin interface."""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from typing import Any

import numpy as np

from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import WORDS, pick

#: The package's functions, correct and with one planted bug each.
FUNCTIONS = {
    "total_value": (
        "def total_value(items):\n    return sum(i['qty'] * i['price'] for i in items)\n",
        "def total_value(items):\n    return sum(i['qty'] + i['price'] for i in items)\n",
    ),
    "low_stock": (
        "def low_stock(items, threshold):\n"
        "    return sorted(i['name'] for i in items if i['qty'] < threshold)\n",
        "def low_stock(items, threshold):\n"
        "    return sorted(i['name'] for i in items if i['qty'] <= threshold)\n",
    ),
    "restock": (
        "def restock(items, name, n):\n    for i in items:\n        if i['name'] == name:\n"
        "            i['qty'] += n\n            return i['qty']\n    raise KeyError(name)\n",
        "def restock(items, name, n):\n    for i in items:\n        if i['name'] == name:\n"
        "            i['qty'] = n\n            return i['qty']\n    raise KeyError(name)\n",
    ),
}


class TermFixUnittest(TerminalTask):
    task_id = "TermFixUnittest"
    description = "Find and fix the bug in a small package so that its unittest suite passes."
    max_steps = 10

    def build(self, rng: np.random.Generator) -> None:
        names = pick(rng, WORDS, 4)
        items = [
            {"name": n, "qty": int(rng.integers(1, 20)), "price": int(rng.integers(2, 50))} for n in names
        ]
        while sum(i["qty"] * i["price"] for i in items) == sum(i["qty"] + i["price"] for i in items):
            items[0]["price"] += 1  # the planted bug must change the total
        threshold = items[int(rng.integers(0, 4))]["qty"]  # one item sits on the threshold
        bug = sorted(FUNCTIONS)[int(rng.integers(0, len(FUNCTIONS)))]
        order = [sorted(FUNCTIONS)[int(i)] for i in rng.permutation(len(FUNCTIONS))]
        target, add = names[int(rng.integers(0, 4))], int(rng.integers(1, 10))
        before = next(i["qty"] for i in items if i["name"] == target)
        fixed = "\n\n".join(FUNCTIONS[f][0] for f in order)
        buggy = "\n\n".join(FUNCTIONS[f][1] if f == bug else FUNCTIONS[f][0] for f in order)
        test = (
            "import unittest\n\nfrom inventory.core import low_stock, restock, total_value\n\n\n"
            f"def items():\n    return {items!r}\n\n\n"
            "class CoreTest(unittest.TestCase):\n"
            "    def test_total_value(self):\n"
            f"        self.assertEqual(total_value(items()), {sum(i['qty'] * i['price'] for i in items)})\n\n"
            "    def test_low_stock(self):\n"
            f"        self.assertEqual(low_stock(items(), {threshold}), "
            f"{sorted(i['name'] for i in items if i['qty'] < threshold)!r})\n\n"
            "    def test_restock(self):\n"
            f"        self.assertEqual(restock(items(), {target!r}, {add}), {before + add})\n\n\n"
            "if __name__ == '__main__':\n    unittest.main()\n"
        )
        self.files = {
            "inventory/__init__.py": "",
            "inventory/core.py": '"""Inventory helpers."""\n\n\n' + buggy,
            "tests/__init__.py": "",
            "tests/test_core.py": test,
        }
        self.params = {
            "bug": bug,
            "fixed": '"""Inventory helpers."""\n\n\n' + fixed,
            "test_sha": hashlib.sha256(test.encode()).hexdigest(),
            "case": [items, threshold, target, add],
        }
        self.instruction = (
            "The unittest suite of the package in /app fails: run it with `python3 -m unittest` "
            "in /app. Find the bug in /app/inventory/core.py and fix it so that every test passes. "
            "Do not change the tests."
        )

    def solution(self) -> str:
        return f"cd /app && cat > inventory/core.py <<'EOF'\n{self.params['fixed']}EOF"

    #: Calls the package's functions on the cases; the host compares the values.
    CHECK = (
        "from inventory.core import low_stock, restock, total_value\n"
        "FUNCTIONS = {'total_value': total_value, 'low_stock': low_stock, 'restock': restock}\n"
        "RESULT = []\n"
        "for name, args in PAYLOAD:\n"
        "    try:\n"
        "        RESULT.append([True, FUNCTIONS[name](*args)])\n"
        "    except Exception as err:\n"
        "        RESULT.append([False, type(err).__name__])\n"
    )

    def cases(self, rng: np.random.Generator) -> list[tuple[str, list[Any]]]:
        """The suite's own calls plus fresh ones drawn at verify time."""
        setups = [self.params["case"]]
        for _ in range(3):
            names = pick(rng, WORDS, int(rng.integers(3, 7)))
            items = [
                {"name": n, "qty": int(rng.integers(1, 20)), "price": int(rng.integers(2, 50))} for n in names
            ]
            pick_one = items[int(rng.integers(0, len(items)))]
            setups.append([items, pick_one["qty"], pick_one["name"], int(rng.integers(1, 10))])
        out: list[tuple[str, list[Any]]] = []
        for items, threshold, target, add in setups:
            out += [
                ("total_value", [items]),
                ("low_stock", [items, threshold]),
                ("restock", [items, target, add]),
            ]
        return out

    def verify(self) -> tuple[bool, str]:
        test = self.read("tests/test_core.py")
        if test is None or hashlib.sha256(test.encode()).hexdigest() != self.params["test_sha"]:
            return False, "the tests were changed"
        cases = self.cases(self.verify_rng())
        got, why = self.python_check(self.CHECK, cases)
        if got is None:
            return False, f"the tests fail: {why}"
        reference: dict[str, Any] = {}
        exec(self.params["fixed"], reference)  # noqa: S102 - the task's own correct source
        for (name, args), answer in zip(cases, got if isinstance(got, list) else [], strict=False):
            want = reference[name](*copy.deepcopy(args))
            if answer != [True, want]:
                return False, f"the tests fail: {name}{tuple(args)!r} gave {answer!r}, expected {want!r}"
        if not isinstance(got, list) or len(got) != len(cases):
            return False, "the tests fail: not every case was answered"
        return True, ""


class TermWordFreq(TerminalTask):
    task_id = "TermWordFreq"
    description = "Write a stdin filter script that prints the most frequent words in a given format."
    max_steps = 10

    FORMATS = {"count word": "{c} {w}", "word:count": "{w}:{c}", "word<TAB>count": "{w}\t{c}"}

    def build(self, rng: np.random.Generator) -> None:
        fmt = sorted(self.FORMATS)[int(rng.integers(0, len(self.FORMATS)))]
        vocab = pick(rng, WORDS, 8)
        cases = [self.make_case(rng, vocab) for _ in range(3)]
        self.files = {"sample.txt": cases[0][1]}
        self.params = {"format": fmt, "cases": cases}
        self.instruction = (
            "Write an executable script /app/wordfreq. It reads text on standard input and takes "
            "one argument N. Words are maximal runs of letters a-z, compared case-insensitively "
            "(print them lowercase). Print the N most frequent words, most frequent first, ties "
            f"broken alphabetically, one per line as `{fmt}` (e.g. `/app/wordfreq 3 < sample.txt`)."
        )

    @staticmethod
    def make_case(rng: np.random.Generator, vocab: list[str]) -> tuple[int, str]:
        n = int(rng.integers(1, 5))
        words = [vocab[int(i)] for i in rng.integers(0, len(vocab), size=int(rng.integers(10, 30)))]
        # Mixed case and punctuation: words are maximal runs of letters, compared lowercased.
        text = " ".join(w.upper() if rng.random() < 0.2 else w for w in words)
        return n, text.replace(" ", ", ", 2) + ".\n"

    def expected(self, n: int, text: str) -> str:
        import re

        counts = Counter(re.findall(r"[a-z]+", text.lower()))
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        return "".join(self.FORMATS[self.params["format"]].format(w=w, c=c) + "\n" for w, c in top)

    def solution(self) -> str:
        line = self.FORMATS[self.params["format"]].replace("\t", "\\t")
        return (
            "cd /app && cat > wordfreq <<'EOF'\n#!/usr/bin/env python3\nimport re, sys\n"
            "from collections import Counter\n"
            "c = Counter(re.findall('[a-z]+', sys.stdin.read().lower()))\n"
            "for w, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[: int(sys.argv[1])]:\n"
            f"    print('{line}'.format(w=w, c=n))\nEOF\nchmod +x wordfreq"
        )

    def verify(self) -> tuple[bool, str]:
        rng = self.verify_rng()
        fresh = [self.make_case(rng, pick(rng, WORDS, 8)) for _ in range(2)]
        cases = [*self.params["cases"], *fresh]
        runs = self.sh_many([f"/app/wordfreq {n}" for n, _ in cases], stdin=[text for _, text in cases])
        for (n, text), (code, stdout) in zip(cases, runs, strict=True):
            want = self.expected(n, text)
            if code != 0 or stdout != want:
                return False, f"/app/wordfreq {n} printed {stdout[:200]!r} (exit {code}), expected {want!r}"
        return True, ""
