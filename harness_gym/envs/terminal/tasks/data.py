"""Data tasks: CSV sums, JSON filtering, SQLite queries, log analysis."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections import Counter

import numpy as np

from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.tasks.words import NAMES, REGIONS, WORDS


class TermCsvColumnSum(TerminalTask):
    task_id = "TermCsvColumnSum"
    description = "Sum one column of a CSV file over the rows of one region."

    def build(self, rng: np.random.Generator) -> None:
        region = REGIONS[int(rng.integers(0, 4))]
        rows, total = ["id,region,item,amount"], 0
        for i in range(int(rng.integers(20, 40))):
            r = REGIONS[int(rng.integers(0, 4))]
            amount = int(rng.integers(1, 500))
            total += amount if r == region else 0
            rows.append(f"{i},{r},{WORDS[int(rng.integers(0, len(WORDS)))]},{amount}")
        self.files = {"sales.csv": "\n".join(rows) + "\n"}
        self.params = {"region": region, "total": total}
        self.instruction = (
            f"/app/sales.csv has columns id,region,item,amount. Write the sum of the amount "
            f"column over the rows whose region is '{region}' (just the integer) to /app/total.txt."
        )

    def solution(self) -> str:
        return (
            f"cd /app && awk -F, 'NR>1 && $2==\"{self.params['region']}\" {{s+=$4}} END {{print s+0}}' "
            "sales.csv > total.txt"
        )

    def verify(self) -> tuple[bool, str]:
        text = (self.read("total.txt") or "").strip()
        ok = text == str(self.params["total"])
        return ok, "" if ok else f"total.txt holds {text!r}"


class TermJsonFilter(TerminalTask):
    task_id = "TermJsonFilter"
    description = "Filter a JSON list of records and write the matching names."

    def build(self, rng: np.random.Generator) -> None:
        limit = int(rng.integers(25, 50))
        users = [
            {"name": n, "age": int(rng.integers(10, 70)), "city": WORDS[int(rng.integers(0, len(WORDS)))]}
            for n in NAMES
        ]
        self.files = {"data/users.json": json.dumps({"users": users}, indent=2) + "\n"}
        self.params = {"limit": limit, "expected": sorted(u["name"] for u in users if u["age"] >= limit)}
        self.instruction = (
            f'/app/data/users.json holds {{"users": [{{"name", "age", "city"}}, ...]}}. Write the '
            f"names of the users aged {limit} or more, sorted alphabetically, one per line, "
            "to /app/older.txt."
        )

    def solution(self) -> str:
        return (
            "cd /app && python3 -c \"import json; u=json.load(open('data/users.json'))['users']; "
            "print('\\n'.join(sorted(x['name'] for x in u "
            f"if x['age'] >= {self.params['limit']})))\" > older.txt"
        )

    def verify(self) -> tuple[bool, str]:
        text = self.read("older.txt")
        if text is None:
            return False, "older.txt is missing"
        ok = text.split() == self.params["expected"]
        return ok, "" if ok else "older.txt does not list the right names"


class TermSqliteTopCustomer(TerminalTask):
    task_id = "TermSqliteTopCustomer"
    description = "Query a SQLite database for the customer with the largest total spend."

    def build(self, rng: np.random.Generator) -> None:
        orders = []
        for i in range(int(rng.integers(20, 40))):
            orders.append((i + 1, NAMES[int(rng.integers(0, 8))], int(rng.integers(1, 300))))
        totals = Counter()
        for _, name, amount in orders:
            totals[name] += amount
        best = max(totals.items(), key=lambda kv: (kv[1], kv[0]))
        if list(totals.values()).count(best[1]) > 1:  # make the answer unique
            orders.append((len(orders) + 1, best[0], 1))
            totals[best[0]] += 1
        fd, path = tempfile.mkstemp(suffix=".db")
        os.close(fd)
        try:
            con = sqlite3.connect(path)
            con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount INTEGER)")
            con.executemany("INSERT INTO orders VALUES (?, ?, ?)", orders)
            con.commit()
            con.close()
            with open(path, "rb") as f:
                blob = f.read()
        finally:
            os.unlink(path)
        self.files = {"shop.db": blob}
        self.params = {"orders": orders, "answer": max(totals, key=lambda n: totals[n])}
        self.instruction = (
            "/app/shop.db is a SQLite database with a table orders(id, customer, amount). Write the "
            "name of the customer whose orders add up to the largest total amount to /app/top.txt."
        )

    def solution(self) -> str:
        return (
            "cd /app && sqlite3 shop.db 'SELECT customer FROM orders GROUP BY customer "
            "ORDER BY SUM(amount) DESC LIMIT 1;' > top.txt"
        )

    def verify(self) -> tuple[bool, str]:
        text = (self.read("top.txt") or "").strip()
        ok = text == self.params["answer"]
        return ok, "" if ok else f"top.txt holds {text!r}"


class TermLogTopIp(TerminalTask):
    task_id = "TermLogTopIp"
    description = "Find the client IP with the most failed requests in an access log."

    def build(self, rng: np.random.Generator) -> None:
        ips = [f"10.0.{int(rng.integers(0, 255))}.{int(rng.integers(1, 255))}" for _ in range(6)]
        ips = list(dict.fromkeys(ips))
        lines, fails = [], Counter()
        for i in range(int(rng.integers(60, 120))):
            ip = ips[int(rng.integers(0, len(ips)))]
            status = int(rng.choice([200, 200, 200, 404, 500]))
            fails[ip] += status >= 400
            lines.append(
                f"{ip} - - [01/Jan/2024:10:{i % 60:02d}:00 +0000] "
                f'"GET /{WORDS[i % len(WORDS)]} HTTP/1.1" {status} 512'
            )
        top = max(fails.values()) if fails else 0
        leaders = [ip for ip in ips if fails[ip] == top]
        if len(leaders) > 1 or top == 0:
            lines.append(f'{leaders[0]} - - [01/Jan/2024:11:00:00 +0000] "GET /x HTTP/1.1" 500 0')
            fails[leaders[0]] += 1
        self.files = {"access.log": "\n".join(lines) + "\n"}
        self.params = {"answer": max(fails, key=lambda ip: fails[ip])}
        self.instruction = (
            "/app/access.log is a web server access log (common log format). Write the client IP "
            "address with the most failed requests (status 400 or above) to /app/top_ip.txt."
        )

    def solution(self) -> str:
        return (
            "cd /app && awk '$9 >= 400 {print $1}' access.log | sort | uniq -c | sort -rn | head -1 "
            "| awk '{print $2}' > top_ip.txt"
        )

    def verify(self) -> tuple[bool, str]:
        text = (self.read("top_ip.txt") or "").strip()
        ok = text == self.params["answer"]
        return ok, "" if ok else f"top_ip.txt holds {text!r}"
