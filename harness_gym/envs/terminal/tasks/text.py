"""Text processing tasks: sort/uniq, grep counting, sed replacement."""

from __future__ import annotations

import numpy as np

from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import WORDS, pick


class TermSortUnique(TerminalTask):
    task_id = "TermSortUnique"
    description = "Write the distinct lines of a file, sorted, to another file."

    def build(self, rng: np.random.Generator) -> None:
        words = pick(rng, WORDS, int(rng.integers(6, 12)))
        lines = [words[int(i)] for i in rng.integers(0, len(words), size=int(rng.integers(15, 30)))]
        self.files = {"words.txt": "\n".join(lines) + "\n"}
        self.params = {"expected": sorted(set(lines))}
        self.instruction = (
            "In /app/words.txt some words appear several times. Write every distinct word once, "
            "sorted alphabetically, one per line, to /app/unique.txt."
        )

    def solution(self) -> str:
        return "cd /app && sort -u words.txt > unique.txt"

    def verify(self) -> tuple[bool, str]:
        text = self.read("unique.txt")
        if text is None:
            return False, "unique.txt is missing"
        ok = text.split() == self.params["expected"] and text.strip() != ""
        return ok, "" if ok else "unique.txt does not hold the sorted distinct words"


class TermCountMatches(TerminalTask):
    task_id = "TermCountMatches"
    description = "Count the lines of a log that contain a level, write the number."

    def build(self, rng: np.random.Generator) -> None:
        levels = ["INFO", "WARN", "ERROR", "DEBUG"]
        target = levels[int(rng.integers(0, 4))]
        lines, count = [], 0
        for i in range(int(rng.integers(30, 60))):
            level = levels[int(rng.integers(0, 4))]
            count += level == target
            lines.append(
                f"2024-01-{1 + i % 28:02d} 12:{i % 60:02d}:00 [{level}] "
                f"{WORDS[int(rng.integers(0, len(WORDS)))]} event {i}"
            )
        self.files = {"logs/app.log": "\n".join(lines) + "\n"}
        self.params = {"level": target, "count": count}
        self.instruction = (
            f"Count the lines of /app/logs/app.log whose level is [{target}] and write just that "
            "number to /app/count.txt."
        )

    def solution(self) -> str:
        return f"cd /app && grep -c '\\[{self.params['level']}\\]' logs/app.log > count.txt; true"

    def verify(self) -> tuple[bool, str]:
        text = (self.read("count.txt") or "").strip()
        ok = text == str(self.params["count"])
        return ok, "" if ok else f"count.txt holds {text!r}"


class TermReplaceText(TerminalTask):
    task_id = "TermReplaceText"
    description = "Replace a word with another in every .txt file of a directory tree."

    def build(self, rng: np.random.Generator) -> None:
        old, new, *fill = pick(rng, WORDS, 8)
        files, expected = {}, {}
        for i in range(int(rng.integers(3, 6))):
            words = [old if rng.random() < 0.3 else fill[int(rng.integers(0, len(fill)))] for _ in range(20)]
            text = " ".join(words) + "\n"
            sub = "docs/" + ("notes/" if i % 2 else "")
            files[f"{sub}part{i}.txt"] = text
            expected[f"{sub}part{i}.txt"] = text.replace(old, new)
        files["docs/keep.md"] = f"{old} stays here\n"
        expected["docs/keep.md"] = files["docs/keep.md"]
        self.files = files
        self.params = {"old": old, "new": new, "expected": expected}
        self.instruction = (
            f"In every .txt file under /app/docs (including subdirectories) replace each "
            f"occurrence of the word '{old}' with '{new}'. Leave other files unchanged."
        )

    def solution(self) -> str:
        p = self.params
        return f"cd /app && find docs -name '*.txt' -exec sed -i 's/{p['old']}/{p['new']}/g' {{}} +"

    def verify(self) -> tuple[bool, str]:
        for rel, text in self.params["expected"].items():
            if self.read(rel) != text:
                return False, f"{rel} is not as expected"
        return True, ""
