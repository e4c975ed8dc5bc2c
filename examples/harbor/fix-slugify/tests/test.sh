#!/bin/bash
mkdir -p /logs/verifier
cd /app
if PYTHONPATH=/app python3 /tests/test_hidden.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
