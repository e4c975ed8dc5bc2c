#!/bin/bash
cd /app
awk -F, '$2 == "math" {s += $3; n++} END {printf "%.2f\n", s / n}' data/scores.csv > math_average.txt
