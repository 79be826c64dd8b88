"""test/harness.py: the assertion harness every Python test uses.

check(cond, msg) prints one PASS/FAIL line; finish() prints "N passed, N failed" and exits
non-zero when anything failed. Mirrors test/harness.h so all tests report alike.
"""
import sys

_passed = 0
_failed = 0


def check(cond, msg):
    global _passed, _failed
    if cond:
        _passed += 1
        print(f"PASS {msg}", flush=True)
    else:
        _failed += 1
        print(f"FAIL {msg}", flush=True)
    return bool(cond)


def finish():
    print(f"{_passed} passed, {_failed} failed", flush=True)
    sys.exit(0 if _failed == 0 else 1)
