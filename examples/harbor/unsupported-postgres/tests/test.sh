#!/bin/bash
mkdir -p /logs/verifier
psql -U postgres app -tc "select name from users" | grep -q ada && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
