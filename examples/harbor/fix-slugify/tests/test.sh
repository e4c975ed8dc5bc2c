#!/bin/bash
mkdir -p /logs/verifier
# No PYTHONPATH=/app here: with it, /app/sitecustomize.py would run in this very process.
if python3 -I /tests/test_hidden.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
