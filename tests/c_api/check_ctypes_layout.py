"""bench/ropejit_ctypes.py builds ropejit_args and ropejit_runtime_options from ropejit.h; this
checks those ctypes structs field by field (name, order, offset) and in size against the
library as compiled (ropejit_struct_field). Needs only the Python standard library.

usage: check_ctypes_layout.py LIBRARY
"""
import ctypes
import os
import sys

sys.dont_write_bytecode = True  # a test run must leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import ropejit_ctypes  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    # Load directly rather than through Library(): it refuses a mismatching library, and here
    # the mismatch itself is the report.
    problems = ropejit_ctypes.layout_mismatches(ctypes.CDLL(sys.argv[1]))
    for name, struct in ropejit_ctypes.STRUCTS.items():
        print(f"{name}: {len(struct._fields_)} fields, {ctypes.sizeof(struct)} bytes")
    for p in problems:
        print("MISMATCH", p)
    if not problems:
        # The binding as bench/peers.py uses it: loads, and its checked Library accepts it.
        ropejit_ctypes.Library(sys.argv[1])
        print("ctypes layout matches the library")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
