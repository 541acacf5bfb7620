#!/usr/bin/env python3
"""ctest peers_reference_catches_errors: bench/peers_reference.py's checks of the fused forms fail
on a wrong output. ropejit's host-backend outputs of the FP8 paged append (q to FP8) and the MLA
latent-cache append (FP8 q and cache; q in place) pass, and each one-byte corruption is caught: a
cache code, an unmapped cache slot, an FP8 (or bf16) q element, an input the launch only reads.
Usage: test_peers_reference.py LIBROPEJIT (host backend); exit 77 without numpy or the host backend."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
try:
    import numpy as np
except ImportError:
    print("SKIPPED: needs numpy")
    sys.exit(77)
import peers  # noqa: E402
import peers_reference as ref  # noqa: E402
from ropejit_ctypes import Library, RopejitError, Runtime  # noqa: E402


def corruptions(problem, outputs):
    """name -> function corrupting a copy of the outputs in one byte."""
    width = outputs["k_cache"].size // (problem.cache_num_pages * problem.page_size)
    slots = problem.inputs["slot_mapping"]
    unmapped = np.setdiff1d(np.arange(problem.cache_num_pages * problem.page_size), slots)[0]
    read_only = problem.op.read_only[0]  # an input the paged launch only reads

    def cache_code(o):
        o["k_cache"].reshape(-1, width)[slots[3], 5] ^= 0x08

    def cache_rope_part(o):  # the rotated part of the row / head
        o["k_cache"].reshape(-1, width)[slots[5], width - 1] ^= 0x10

    def unmapped_slot(o):
        o["k_cache"].reshape(-1, width)[unmapped, 0] ^= 1

    def q_element(o):
        o.get("q_out", o["q"]).reshape(-1)[7] ^= 0x04

    def input_kept(o):
        o[read_only].reshape(-1)[0] ^= 1
    return {f.__name__: f for f in (cache_code, cache_rope_part, unmapped_slot, q_element, input_kept)}


def main():
    try:
        runtime = Runtime(Library(sys.argv[1]), "host")
    except (OSError, RopejitError, IndexError) as e:
        print(f"SKIPPED: needs a host-backend libropejit ({e})")
        return 77
    rng = np.random.default_rng(43)
    failed = total = 0
    for label in ("llama-3.1-8b-paged-fp8-q", "deepseek-v3-mla-fp8-q", "deepseek-v3-mla-fp8"):
        spec = ref.load_spec(label, "bf16")
        problem = ref.Problem(spec, 64, rng)
        outputs = peers.launch_host(runtime.kernel(spec), problem)
        rows = ref.check_rows(64, rng)
        ok, note = ref.check_outputs(problem, outputs, rows)
        total += 1
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}: ropejit passes: {note}")
        for name, corrupt in corruptions(problem, outputs).items():
            copy = {n: a.copy() for n, a in outputs.items()}
            corrupt(copy)
            caught, note = ref.check_outputs(problem, copy, rows)
            caught = not caught
            total += 1
            failed += not caught
            print(f"{'ok  ' if caught else 'FAIL'} {label}: {name} {'caught' if caught else 'NOT caught'}: {note}")
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
