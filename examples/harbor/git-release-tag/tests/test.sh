#!/bin/bash
mkdir -p /logs/verifier
cd /app
ok=1
[ "$(cat VERSION)" = "1.5.0" ] || ok=0
[ "$(git log -1 --format=%s)" = "Release 1.5.0" ] || ok=0
[ "$(git cat-file -t v1.5.0 2>/dev/null)" = "tag" ] || ok=0
[ "$(git rev-parse v1.5.0^{commit} 2>/dev/null)" = "$(git rev-parse HEAD)" ] || ok=0
[ -z "$(git status --porcelain)" ] || ok=0
[ "$(git rev-list --count HEAD)" = "2" ] || ok=0
echo $ok > /logs/verifier/reward.txt
