#!/usr/bin/env python3
"""ctest gpu_check_dry_run: `bash scripts/gpu-check.sh --dry-run` against small fake bundles (stand-in
binaries, wheels and FlashInfer tarball of a few bytes each), so the completeness, carry-size, time
and command-line checks are tested without scripts/gpu-prepare.sh: a complete bundle passes, and
each broken one fails naming what is wrong. Usage: test_gpu_plan.py [HOST_LIB] (a host-backend
libropejit: the peers.py --dry-run step runs too)."""
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(REPO, "scripts"), os.path.join(REPO, "bench")]
import peers_flashinfer  # noqa: E402
import peers_liger  # noqa: E402
import stage_peers  # noqa: E402


def write_zip(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)


def liger_sources(rename=None):
    """Stand-in liger_kernel files: each class of peers_liger.API with the forward() it expects."""
    files = {m: "" for m in stage_peers.LIGER_REQUIRED}
    for rel, (cls, params) in peers_liger.API.items():
        params = [rename.get(p, p) for p in params] if rename else params
        files[rel] = f"class {cls}:\n    @staticmethod\n    def forward({', '.join(params)}):\n        pass\n"
    return files


def make_bundle(root, drop=(), liger=None, tree_skip=()):
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "lib"))
    os.makedirs(os.path.join(root, "peers", "wheels"))
    for name in ("ropejit", "ropejit_tests", "ropejit_bench_gpu"):
        path = os.path.join(root, "bin", name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(path, 0o755)
    with open(os.path.join(root, "lib", "libropejit.so.0"), "w") as f:
        f.write("stand-in")
    with open(os.path.join(root, "gpu_tier_filter.txt"), "w") as f:
        f.write("Backend/Conformance.*/cuda\n")
    wheels = os.path.join(root, "peers", "wheels")
    write_zip(os.path.join(wheels, "liger_kernel-0.8.5-py3-none-any.whl"), liger or liger_sources())
    write_zip(os.path.join(wheels, "apache_tvm_ffi-0.1.15.post2-cp312-cp312-manylinux_2_28_x86_64.whl"),
              {m: "x" for m in stage_peers.TVM_FFI_REQUIRED})
    with tarfile.open(os.path.join(root, "peers", stage_peers.TARBALL), "w:xz") as tar:
        for m in peers_flashinfer.TREE_REQUIRED:
            if m not in tree_skip:
                info = tarfile.TarInfo(m)
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
    for rel in drop:
        os.remove(os.path.join(root, rel))


def dry_run(bundle, stages=(), env=None, host_lib=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("T_") and k not in ("TUNE_SPECS", "PEERS_ARGS")}
    e.update(GPU_BUNDLE=bundle, GPU_PLAN_HOST_LIB=host_lib or "")  # empty: no peers.py run
    e.update(env or {})
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "gpu-check.sh"), "--dry-run", *stages],
                          capture_output=True, text=True, env=e, cwd=REPO)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    host_lib = sys.argv[1] if len(sys.argv) > 1 and os.path.exists(sys.argv[1]) else None
    if host_lib and importlib.util.find_spec("numpy") is None:  # peers.py's dry run needs numpy
        print("SKIPPED: the peers.py --dry-run case: no numpy (scripts/setup.sh puts one in .deps/python)")
        host_lib = None
    cases = [  # name, bundle options, stages, env, expected exit, text the output must hold
        ("complete bundle passes", {}, (), {}, 0, "total       540 s"),
        ("tune alone may take the call", {}, ("tune",), {"T_TUNE": "540"}, 0, "tune        540 s"),
        ("missing Liger wheel", {"drop": ["peers/wheels/liger_kernel-0.8.5-py3-none-any.whl"]}, (), {}, 1,
         "lacks liger-kernel==0.8.5"),
        ("Liger API changed", {"liger": liger_sources(rename={"rotary_dim": "rope_dim"})}, (), {}, 1,
         "FAILED: liger API: liger_kernel/ops/rope.py: LigerRopeFunction.forward("),
        ("FlashInfer tree without rope.cu", {"tree_skip": ["csrc/rope.cu"]}, (), {}, 1,
         f"{stage_peers.TARBALL} lacks csrc/rope.cu"),
        ("missing test binary", {"drop": ["bin/ropejit_tests"]}, (), {}, 1, "bundle: bin/ropejit_tests missing"),
        ("budgets over 9 minutes", {}, (), {"T_PEERS": "400"}, 1, "sum to 750 s, over the call's 540 s"),
        ("budget not a number", {}, ("tests",), {"T_TESTS": "ninety"}, 1, "T_TESTS='ninety' is not a whole number"),
        ("tune spec that is not there", {}, ("tune",), {"TUNE_SPECS": "specs/no-such-model.json"}, 1,
         "TUNE_SPECS: specs/no-such-model.json"),
        ("unknown stage", {}, ("warmup",), {}, 2, "stage 'warmup' is not allowed"),
        ("carry over the limit", {"big": True}, (), {}, 1, "over the budget of 60 MiB"),
    ]
    if host_lib:
        cases.append(("peers.py --dry-run with the carried Liger", {}, ("peers",), {}, 0, "peers.py --dry-run: ok"))
    failed = 0
    for name, options, stages, env, want_rc, want_text in cases:
        with tempfile.TemporaryDirectory(prefix="gpu-plan-test-") as tmp:
            bundle = os.path.join(tmp, "gpu-bundle")
            options = dict(options)
            big = options.pop("big", False)
            make_bundle(bundle, **options)
            if big:  # sparse: 70 MiB by size (what the carry counts), nothing on disk
                with open(os.path.join(bundle, "lib", "big.so"), "wb") as f:
                    f.truncate(70 << 20)
            rc, out = dry_run(bundle, stages, env, host_lib if "peers.py" in name else None)
        ok = rc == want_rc and want_text in out
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc} (want {want_rc})")
        if not ok:
            print(f"     wanted {want_text!r} in:\n" + "\n".join("     | " + line for line in out.splitlines()[-25:]))
    if not host_lib and not (len(sys.argv) > 1 and os.path.exists(sys.argv[1])):
        print("SKIPPED: the peers.py --dry-run case (no host-backend library given)")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
