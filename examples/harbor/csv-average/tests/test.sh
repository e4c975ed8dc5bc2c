#!/bin/bash
mkdir -p /logs/verifier
python3 /tests/check_average.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
