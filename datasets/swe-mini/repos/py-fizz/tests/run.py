"""Minimal test runner (python3-minimal has no unittest or pytest).

Runs every test_* function of tests/test_*.py and prints one pytest -rA style
line per test: "PASSED tests/test_x.py::test_name" or "FAILED ... - reason".
Exits 1 when a test failed.
"""
import os
import sys
import traceback

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, root)
failed = 0
for name in sorted(os.listdir(os.path.join(root, "tests"))):
    if not (name.startswith("test_") and name.endswith(".py")):
        continue
    rel = "tests/" + name
    ns = {"__name__": name[:-3]}
    with open(os.path.join(root, rel)) as f:
        exec(compile(f.read(), rel, "exec"), ns)
    for fn in sorted(k for k in ns if k.startswith("test_") and callable(ns[k])):
        try:
            ns[fn]()
        except Exception as e:
            failed += 1
            traceback.print_exc()
            print("FAILED %s::%s - %s: %s" % (rel, fn, type(e).__name__, e))
        else:
            print("PASSED %s::%s" % (rel, fn))
sys.exit(1 if failed else 0)
