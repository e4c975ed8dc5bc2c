#!/bin/bash
cd /app
echo 1.5.0 > VERSION
git commit -qam "Release 1.5.0"
git tag -a v1.5.0 -m "Version 1.5.0"
