#!/usr/bin/env python3
"""The dry run of scripts/gpu-check.sh (`bash scripts/gpu-check.sh --dry-run [STAGE...]`), here,
without a GPU: is the bundle complete, does the call fit the carry limit and the 9-minute plan,
does each stage's command line resolve. Prints the plan with each stage's seconds; exit 0 when
every check passes, 1 when one fails (each failure on a line starting FAILED), 2 on bad input.

gpu-check.sh hands over its plan in the environment (the same variables a real run reads: T_TESTS,
T_BENCH, T_PEERS, T_TUNE, T_COUNTERS, GPU_TEST_FILTER, MAIN_JOB_SPECS, BENCHES, BENCH_FILTER,
PEERS_SHAPES, PEERS_ARGS, TUNE_SPECS, TUNE_TOKENS, COUNTER_SPECS). Limits: CALL_BUDGET_S (540: a
device command may run 600 s; the rest is packing and the kill grace of each cut command) and
CARRY_BUDGET_MIB (60 of the 64 MiB the device call carries: the repository's tracked and
untracked-not-ignored files, shared/ where there is one, and the bundle).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# numpy for peers.py where the system python has none: scripts/setup.sh's project-local folder
PYTHON_DEPS = os.environ.get("ROPEJIT_PYTHON_DEPS") or os.path.join(REPO, ".deps", "python")
if os.path.isdir(PYTHON_DEPS):
    sys.path.append(PYTHON_DEPS)
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import peers_flashinfer  # noqa: E402  (stdlib only at import)
import peers_liger  # noqa: E402
import stage_peers  # noqa: E402

ORDER = ("tests", "bench", "peers", "tune", "counters")
BUDGET_VARS = {"tests": "T_TESTS", "bench": "T_BENCH", "peers": "T_PEERS", "tune": "T_TUNE", "counters": "T_COUNTERS"}
CARRY_LIMIT_MIB = 64


class Plan:
    def __init__(self):
        self.failures, self.passed = [], 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAILED: {what}")
        return ok


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not os.path.islink(os.path.join(d, f)))


def repo_bytes():
    """(bytes, files) of what a device call sends from this checkout: tracked and
    untracked-not-ignored files, and shared/ where there is one."""
    proc = subprocess.run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"gpu_plan: {REPO} is not a git checkout (git ls-files failed): what a device call "
                         f"carries cannot be counted\n{proc.stderr.decode()[-500:]}")
    out = proc.stdout
    files = [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(REPO, f))]
    total = sum(os.path.getsize(os.path.join(REPO, f)) for f in files)
    shared = os.path.join(REPO, "shared")
    if os.path.isdir(shared) and not any(f.startswith("shared/") for f in files):
        total += folder_bytes(shared)
    return total, len(files)


def env_int(plan, name):
    value = os.environ.get(name, "")
    if not plan.check(value.isdigit() and int(value) > 0, f"{name}={value!r} is not a whole number of seconds > 0"):
        return 0
    return int(value)


def check_spec_files(plan, names, what):
    for name in names:
        path = name if name.endswith(".json") else os.path.join("specs", name + ".json")
        full = os.path.join(REPO, path)
        try:
            with open(full) as f:
                json.load(f)
            plan.passed += 1
        except (OSError, ValueError) as e:
            plan.check(False, f"{what}: {path}: {e}")


def check_bundle_files(plan, bundle, stages):
    need = ["bin/ropejit", "bin/ropejit_tests", "lib/libropejit.so.0", "gpu_tier_filter.txt"]
    if "bench" in stages:
        need += [f"bin/{b}" for b in os.environ.get("BENCHES", "").split()]
    for rel in need:
        path = os.path.join(bundle, rel)
        plan.check(os.path.isfile(path) and os.path.getsize(path) > 0, f"bundle: {rel} missing or empty")
    for rel in ("bin/ropejit", "bin/ropejit_tests"):
        path = os.path.join(bundle, rel)
        if os.path.isfile(path):
            plan.check(os.access(path, os.X_OK), f"bundle: {rel} is not executable")


def check_peers(plan, bundle, host_lib, work):
    """The peers' wheels and tree, the Liger API, peers.py's options, and peers.py --dry-run."""
    peers = os.path.join(bundle, "peers")
    wheels = os.path.join(peers, "wheels")
    found = {n: stage_peers.wheel_path(wheels, n) if os.path.isdir(wheels) else None
             for n in stage_peers.CARRIED_WHEELS}
    for name, path in found.items():
        plan.check(path is not None, f"bundle: peers/wheels lacks {stage_peers.PINS[name][1]} (scripts/gpu-prepare.sh)")
    liger_root = None
    for name, required in (("liger_kernel", stage_peers.LIGER_REQUIRED), ("apache_tvm_ffi", stage_peers.TVM_FFI_REQUIRED)):
        if not found.get(name):
            continue
        target = os.path.join(work, name)
        try:
            with zipfile.ZipFile(found[name]) as z:  # a wheel is a zip: unpacked as pip --target would
                z.extractall(target)
        except zipfile.BadZipFile as e:
            plan.check(False, f"bundle: {os.path.basename(found[name])} does not unpack: {e}")
            continue
        for member in required:
            plan.check(os.path.exists(os.path.join(target, member)), f"{os.path.basename(found[name])} lacks {member}")
        if name == "liger_kernel":
            liger_root = target
            for problem in peers_liger.api_problems(target):
                plan.check(False, f"liger API: {problem}")
    tree = None
    tarball = os.path.join(peers, stage_peers.TARBALL)
    if plan.check(os.path.isfile(tarball), f"bundle: peers/{stage_peers.TARBALL} missing"):
        try:
            with tarfile.open(tarball) as tar:
                names = set(tar.getnames())
                missing = [m for m in peers_flashinfer.TREE_REQUIRED if m not in names]
                for m in missing:
                    plan.check(False, f"{stage_peers.TARBALL} lacks {m}")
                if not missing:
                    tree = os.path.join(work, "flashinfer-rope")
                    if hasattr(tarfile, "data_filter"):  # members stay inside `tree`
                        tar.extractall(tree, filter="data")
                    else:
                        tar.extractall(tree)
        except (tarfile.TarError, OSError) as e:
            plan.check(False, f"{stage_peers.TARBALL} does not unpack: {e}")
    prebuilt = os.path.join(peers, "flashinfer-build", "flashinfer_rope.so")
    print("FlashInfer rope module: " + ("prebuilt (taken on the GPU when its nvcc version matches)"
                                        if os.path.isfile(prebuilt) else "not prebuilt: built on the GPU (about a minute)"))
    shapes = os.environ.get("PEERS_SHAPES", "").split()
    plan.check(bool(shapes), "PEERS_SHAPES is empty")
    try:
        import peers  # noqa: PLC0415  (needs numpy: exits 77 without it)
        for shape in shapes:
            peers.parse_args(["--lib", "x", "--shapes", shape] + shlex.split(os.environ.get("PEERS_ARGS", "")))
            plan.passed += 1
    except SystemExit as e:
        if e.code == 77:  # peers.py's SKIPPED exit
            print("peers.py options: SKIPPED (no numpy here)")
        else:
            plan.check(False, "peers.py rejects PEERS_SHAPES / PEERS_ARGS (above)")
    if not host_lib:
        print("peers.py --dry-run: SKIPPED (no host-backend libropejit: build/libropejit.so or GPU_PLAN_HOST_LIB)")
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (liger_root, env.get("PYTHONPATH"), PYTHON_DEPS) if p)
    cmd = [sys.executable, os.path.join(REPO, "bench", "peers.py"), "--dry-run", "--lib", host_lib,
           "--shapes", shapes[0] if shapes else "llama-3.1-8b", "--tokens", "1", "--dtypes", "bf16"]
    if tree:
        cmd += ["--flashinfer-tree", tree]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    liger_line = [line for line in proc.stdout.splitlines() if "liger_kernel at" in line]
    if proc.returncode == 77:
        print(f"peers.py --dry-run: SKIPPED ({proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''})")
    elif plan.check(proc.returncode == 0 and bool(liger_line),
                    f"peers.py --dry-run (carried Liger on PYTHONPATH) exit {proc.returncode}:\n"
                    f"{(proc.stdout + proc.stderr)[-1500:]}"):
        print(f"peers.py --dry-run: ok (host backend checked; Liger wheel {'and FlashInfer tree ' if tree else ''}"
              "found by peers.py)")


def describe(stage):
    e = os.environ.get
    if stage == "tests":
        f = e("GPU_TEST_FILTER", "")
        return (f"ropejit_tests --gtest_filter=<{'the gpu tier' if f == 'tier' else str(len(f.split(':'))) + ' suites'}>; "
                f"ropejit run {e('MAIN_JOB_SPECS', '')} (<= 30 s each)")
    if stage == "bench":
        return f"{e('BENCHES', '')} --benchmark_filter='{e('BENCH_FILTER', '')}'"
    if stage == "peers":
        return f"peers.py per shape: {e('PEERS_SHAPES', '')} ({e('PEERS_ARGS', '')})"
    if stage == "tune":
        n = len(e("TUNE_SPECS", "").split())
        return f"ropejit tune, one spec a run, {n} specs in order at T {e('TUNE_TOKENS', '')} (those not reached: tune-remaining.txt)"
    return f"ncu on ropejit run: {e('COUNTER_SPECS', '')}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True)
    p.add_argument("--stages", required=True, help="the stages to run, in order (space-separated)")
    p.add_argument("--host-lib", help="a host-backend libropejit for peers.py --dry-run")
    a = p.parse_args(argv)
    stages = a.stages.split()
    bad = [s for s in stages if s not in ORDER]
    if bad or not stages:
        print(f"gpu_plan: stages {bad or '(none)'} not allowed: {', '.join(ORDER)}", file=sys.stderr)
        return 2
    plan = Plan()
    print(f"gpu-check dry run (no GPU): bundle {a.bundle}, stages {' '.join(stages)}")
    if not plan.check(os.path.isdir(a.bundle), f"bundle {a.bundle} does not exist: run scripts/gpu-prepare.sh"):
        return 1
    check_bundle_files(plan, a.bundle, stages)
    if "tests" in stages:
        plan.check(bool(os.environ.get("GPU_TEST_FILTER")), "GPU_TEST_FILTER is empty")
        check_spec_files(plan, os.environ.get("MAIN_JOB_SPECS", "").split(), "MAIN_JOB_SPECS")
    if "tune" in stages:
        tokens = os.environ.get("TUNE_TOKENS", "").split(",")
        plan.check(all(t.isdigit() and int(t) > 0 for t in tokens), f"TUNE_TOKENS={','.join(tokens)!r}")
        check_spec_files(plan, os.environ.get("TUNE_SPECS", "").split(), "TUNE_SPECS")
    if "counters" in stages:
        check_spec_files(plan, os.environ.get("COUNTER_SPECS", "").split(), "COUNTER_SPECS")
    with tempfile.TemporaryDirectory(prefix="gpu-plan-") as work:
        if "peers" in stages:
            check_peers(plan, a.bundle, a.host_lib, work)

    call_budget = int(os.environ.get("CALL_BUDGET_S", "540"))
    budgets = {s: env_int(plan, BUDGET_VARS[s]) for s in stages}
    total = sum(budgets.values())
    plan.check(total <= call_budget, f"the stages' budgets sum to {total} s, over the call's {call_budget} s")
    repo, nfiles = repo_bytes()
    bundle = folder_bytes(a.bundle)
    carry_budget = float(os.environ.get("CARRY_BUDGET_MIB", "60"))
    carried = (repo + bundle) / 2**20
    plan.check(carried <= carry_budget, f"carry {carried:.1f} MiB is over the budget of {carry_budget:g} MiB "
               f"(the device call's limit: {CARRY_LIMIT_MIB} MiB)")

    print("\nplan (one device call):")
    print(f"  {'stage':9} {'budget':>7}  runs")
    for s in stages:
        print(f"  {s:9} {budgets[s]:>5} s  {describe(s)}")
    print(f"  {'total':9} {total:>5} s  of {call_budget} s (the device command's limit is 600 s)")
    print(f"carry: repository {repo / 2**20:.1f} MiB ({nfiles} files) + bundle {bundle / 2**20:.1f} MiB"
          f" = {carried:.1f} MiB of {CARRY_LIMIT_MIB} MiB (budget {carry_budget:g})")
    peers = os.path.join(a.bundle, "peers")
    if os.path.isdir(peers):
        print(f"  of which peers/ {folder_bytes(peers) / 2**20:.1f} MiB: " + ", ".join(
            f"{f} {os.path.getsize(os.path.join(d, f)) / 2**20:.1f}" for d, _, fs in os.walk(peers) for f in sorted(fs)))
    print(f"checks: {plan.passed} passed, {len(plan.failures)} failed")
    return 1 if plan.failures else 0


if __name__ == "__main__":
    sys.exit(main())
