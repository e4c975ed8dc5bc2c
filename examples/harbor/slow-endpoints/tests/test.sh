#!/bin/bash
mkdir -p /logs/verifier
python3 - <<'PY'
import json
from collections import defaultdict

total, count = defaultdict(int), defaultdict(int)
for line in open("/app/logs/requests.log"):
    _, _, path, _, ms = line.split()
    total[path] += int(ms.removesuffix("ms"))
    count[path] += 1
want = {p: round(total[p] / count[p], 1) for p in total if total[p] / count[p] > 200}
try:
    got = json.load(open("/app/slow.json"))
    ok = set(got) == set(want) and all(abs(float(got[p]) - want[p]) <= 0.051 for p in want)
except Exception as err:  # noqa: BLE001
    print("bad slow.json:", err)
    ok = False
json.dump({"reward": 1.0 if ok else 0.0}, open("/logs/verifier/reward.json", "w"))
PY
