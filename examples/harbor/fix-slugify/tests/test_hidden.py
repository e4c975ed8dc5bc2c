"""Judges /app/textutil/slug.py without importing it here: a child process imports the
agent's module and prints slugify's results as JSON; this process compares them. The agent's
code can then end its own process however it likes (exit 0, print "ok"): only the values
count. /app goes last on the child's sys.path, so no file of the agent's shadows a standard
module."""

import json
import subprocess
import sys

cases = {
    "Hello,  World!": "hello-world",
    "  Leading and trailing  ": "leading-and-trailing",
    "Already-a-slug": "already-a-slug",
    "Numbers 2 and 3.14": "numbers-2-and-3-14",
    "---": "",
    "MiXeD__case": "mixed-case",
}
child = (
    "import json, sys\n"
    "sys.path.append('/app')\n"
    "from textutil.slug import slugify\n"
    "print('HG-RESULT ' + json.dumps([slugify(t) for t in json.loads(sys.stdin.read())]))\n"
)
# Not -I: that would drop the verifier's PYTHONPYCACHEPREFIX (bytecode compiled from source).
argv = [sys.executable, "-s", "-c", child]
done = subprocess.run(argv, input=json.dumps(list(cases)), capture_output=True, text=True, cwd="/tmp")
lines = [line for line in done.stdout.splitlines() if line.startswith("HG-RESULT ")]
assert len(lines) == 1, ("no result from the module", done.stdout[-500:], done.stderr[-500:])
got = json.loads(lines[0].removeprefix("HG-RESULT "))
assert got == list(cases.values()), list(zip(cases, got))
print("ok")
