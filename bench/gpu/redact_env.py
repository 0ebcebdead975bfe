"""nccl-tests' JSON output (-J) holds the whole process environment: keep each variable's name and drop its
value, leaving the file otherwise as nccl-tests wrote it (a cut one included). Usage: redact_env.py FILE..."""
import json
import re
import sys

# A JSON string "NAME=value", escaped quotes and backslashes inside the value included.
_ASSIGNMENT = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)=(?:[^"\\]|\\.)*"')

for name in sys.argv[1:]:
    with open(name, encoding="utf-8", errors="surrogateescape") as handle:
        text = _ASSIGNMENT.sub(r'"\1=(value removed)"', handle.read())
    with open(name, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(text)
    try:
        print(name, list(json.loads(text)))
    except ValueError as exc:
        print(name, "not JSON:", exc)
