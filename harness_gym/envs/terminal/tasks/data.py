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


class TermCsvToJson(TerminalTask):
    task_id = "TermCsvToJson"
    description = "Convert the rows of a CSV file to a typed, filtered, sorted JSON list."

    def build(self, rng: np.random.Generator) -> None:
        city = WORDS[int(rng.integers(0, 6))]
        rows = []
        for name in NAMES:
            rows.append(
                {"name": name, "age": int(rng.integers(18, 80)), "city": WORDS[int(rng.integers(0, 6))]}
            )
        if not any(r["city"] == city for r in rows):
            rows[int(rng.integers(0, len(rows)))]["city"] = city
        key = ["age", "name"][int(rng.integers(0, 2))]
        text = "name,age,city\n" + "".join(f"{r['name']},{r['age']},{r['city']}\n" for r in rows)
        expected = sorted((r for r in rows if r["city"] == city), key=lambda r: (r[key], r["name"]))
        self.files = {"people.csv": text}
        self.params = {"city": city, "key": key, "expected": expected}
        self.instruction = (
            "/app/people.csv has columns name,age,city. Write /app/people.json: a JSON array of "
            f"the rows whose city is '{city}', each an object with keys name (string), age "
            f"(integer) and city (string), sorted by {key}" + (" (ties by name)." if key == "age" else ".")
        )

    def solution(self) -> str:
        p = self.params
        return (
            "cd /app && python3 -c \"import csv, json; r=[dict(x, age=int(x['age'])) for x in "
            f"csv.DictReader(open('people.csv')) if x['city']=='{p['city']}']; "
            f"r.sort(key=lambda x: (x['{p['key']}'], x['name'])); json.dump(r, open('people.json','w'))\""
        )

    def verify(self) -> tuple[bool, str]:
        text = self.read("people.json")
        if text is None:
            return False, "people.json is missing"
        try:
            data = json.loads(text)
        except ValueError as err:
            return False, f"people.json is not JSON: {err}"
        ok = data == self.params["expected"] and all(
            isinstance(r, dict) and type(r.get("age")) is int for r in data
        )
        return ok, "" if ok else "people.json does not hold the expected rows"


class TermSqliteUpdate(TerminalTask):
    task_id = "TermSqliteUpdate"
    description = "Update prices and delete rows in a SQLite database."

    def build(self, rng: np.random.Generator) -> None:
        categories = pick_categories(rng)
        rows = []
        for i, name in enumerate(WORDS[: int(rng.integers(12, 24))]):
            rows.append(
                (
                    i + 1,
                    name,
                    categories[int(rng.integers(0, 3))],
                    int(rng.integers(100, 5000)),
                    int(rng.integers(0, 4)),
                )
            )
        category, percent = categories[int(rng.integers(0, 3))], int(rng.integers(5, 30))
        if not any(r[4] == 0 for r in rows):
            rows[0] = (*rows[0][:4], 0)
        expected = [
            (i, n, c, p * (100 + percent) // 100 if c == category else p, s)
            for i, n, c, p, s in rows
            if s != 0
        ]
        self.files = {
            "store.db": sqlite_blob(
                "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, category TEXT, "
                "price INTEGER, stock INTEGER)",
                "INSERT INTO products VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        }
        self.params = {"category": category, "percent": percent, "expected": expected}
        self.instruction = (
            "/app/store.db is a SQLite database with a table products(id, name, category, price, "
            f"stock); prices are integer cents. Raise the price of every product in category "
            f"'{category}' by {percent} percent (new price = price * {100 + percent} / 100, "
            "rounded down to an integer), and delete every product whose stock is 0."
        )

    def solution(self) -> str:
        p = self.params
        return (
            f'cd /app && sqlite3 store.db "UPDATE products SET price = price * {100 + p["percent"]} / 100 '
            f"WHERE category = '{p['category']}'; DELETE FROM products WHERE stock = 0;\""
        )

    #: Reads the table from a copy of the database in the verifier's isolated Python.
    CHECK = (
        "import shutil, sqlite3\n"
        "shutil.copyfile('/app/store.db', '/tmp/store.db')\n"
        "con = sqlite3.connect('/tmp/store.db')\n"
        "kind = con.execute(\"SELECT type FROM sqlite_master WHERE name = 'products'\").fetchall()\n"
        "cols = [r[1] for r in con.execute('PRAGMA table_info(products)')]\n"
        "rows = con.execute('SELECT id, name, category, price, stock FROM main.products ORDER BY id')\n"
        "rows = rows.fetchall()\n"
        "RESULT = {'kind': kind, 'cols': cols, 'rows': rows}\n"
    )

    def verify(self) -> tuple[bool, str]:
        """The rows of the table itself (not a view or anything in the agent's ~/.sqliterc)."""
        got, why = self.python_check(self.CHECK, None)
        if not isinstance(got, dict):
            return False, f"cannot read store.db: {why}"
        if got.get("kind") != [["table"]] or got.get("cols") != ["id", "name", "category", "price", "stock"]:
            return False, f"products is no longer the original table (it is {got.get('kind')!r})"
        ok = [tuple(r) for r in got.get("rows", [])] == [tuple(r) for r in self.params["expected"]]
        return ok, "" if ok else "the products table is not as expected"


class TermLogErrorsPerHour(TerminalTask):
    task_id = "TermLogErrorsPerHour"
    description = "Count the ERROR lines of a log per hour and write a CSV summary."

    def build(self, rng: np.random.Generator) -> None:
        day = f"2024-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        lines, counts = [], Counter()
        start = int(rng.integers(0, 18))
        for _ in range(int(rng.integers(40, 90))):
            hour = start + int(rng.integers(0, 6))
            level = ["INFO", "INFO", "WARN", "ERROR"][int(rng.integers(0, 4))]
            counts[hour] += level == "ERROR"
            stamp = f"{day} {hour:02d}:{int(rng.integers(0, 60)):02d}:{int(rng.integers(0, 60)):02d}"
            lines.append((stamp, f"{stamp} {level} {WORDS[int(rng.integers(0, len(WORDS)))]} request failed"))
        lines.sort()
        if not counts or sum(counts.values()) == 0:
            lines.append((f"{day} {start:02d}:59:59", f"{day} {start:02d}:59:59 ERROR late"))
            counts[start] += 1
        body = "".join(f"{h:02d},{c}\n" for h, c in sorted(counts.items()) if c)
        self.files = {"logs/service.log": "".join(text + "\n" for _, text in lines)}
        self.params = {"expected": "hour,count\n" + body}
        self.instruction = (
            "/app/logs/service.log has lines 'YYYY-MM-DD HH:MM:SS LEVEL message'. Write "
            "/app/errors_by_hour.csv with the header 'hour,count' and one row per hour (two "
            "digits, e.g. 07) that has at least one ERROR line, giving the number of ERROR "
            "lines in that hour, sorted by hour."
        )

    def solution(self) -> str:
        return (
            "cd /app && awk '$3 == \"ERROR\" {print substr($2, 1, 2)}' logs/service.log | sort | uniq -c "
            '| awk \'BEGIN {print "hour,count"} {print $2 "," $1}\' > errors_by_hour.csv'
        )

    def verify(self) -> tuple[bool, str]:
        text = self.read("errors_by_hour.csv")
        ok = text is not None and text.strip() == self.params["expected"].strip()
        return ok, "" if ok else f"errors_by_hour.csv holds {(text or '')[:200]!r}"


def pick_categories(rng: np.random.Generator) -> list[str]:
    return [("tools", "garden", "kitchen", "toys", "books")[int(i)] for i in rng.choice(5, 3, replace=False)]


def sqlite_blob(create: str, insert: str, rows: list[tuple]) -> bytes:
    """The bytes of a fresh SQLite database holding ``rows``."""
    fd, path = tempfile.mkstemp(suffix=".db")
    os.close(fd)
    try:
        con = sqlite3.connect(path)
        con.execute(create)
        con.executemany(insert, rows)
        con.commit()
        con.close()
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)
