#!/bin/bash
cd /app
awk '{ms = $5; sub(/ms$/, "", ms); t[$3] += ms; n[$3]++}
     END {printf "{"; sep = ""; for (p in t) if (t[p] / n[p] > 200) {printf "%s\"%s\": %.1f", sep, p, t[p] / n[p]; sep = ", "}; print "}"}' \
  logs/requests.log > slow.json
