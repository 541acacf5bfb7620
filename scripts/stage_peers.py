#!/usr/bin/env python3
"""Stages the peers of bench/peers.py into gpu-bundle/peers/ (run by scripts/gpu-prepare.sh here).

The GPU machine reaches no package registry, and its image already has torch, triton and numpy
(KINDS.md), so only what it lacks travels:
  wheels/liger_kernel-0.8.5-py3-none-any.whl          Liger-Kernel's Triton RoPE (pure Python, 0.9 MB)
  wheels/apache_tvm_ffi-0.1.15.post2-cp312-*.whl      the runtime FlashInfer's kernels bind to (3.3 MB)
  flashinfer-rope.tar.xz                              FlashInfer 0.7.2.post1's rope sources and headers
                                                      (about 1.6 MB; why not the package:
                                                      bench/peers_flashinfer.py's header)
gpu-check.sh installs the wheels with pip --no-index --no-deps --target and unpacks the tarball;
the dry run (scripts/gpu_plan.py) checks every piece named in PINS and REQUIRED.

Usage: stage_peers.py DOWNLOADS BUNDLE   DOWNLOADS holds the wheels of PINS (pip download)
       stage_peers.py --requirements     prints the pinned requirements, one a line
"""
import io
import os
import shutil
import sys
import tarfile
import zipfile

# name -> (version, pip requirement); one version of each (two would stop pip --no-index).
PINS = {
    "liger_kernel": ("0.8.5", "liger-kernel==0.8.5"),
    "apache_tvm_ffi": ("0.1.15.post2", "apache-tvm-ffi==0.1.15.post2"),
    "flashinfer_python": ("0.7.2.post1", "flashinfer-python==0.7.2.post1"),
}
CARRIED_WHEELS = ("liger_kernel", "apache_tvm_ffi")  # flashinfer_python travels as the tarball
TARBALL = "flashinfer-rope.tar.xz"
# Folders and files of the flashinfer wheel's data/ that the rope module's build reads (nvcc -M on
# csrc/rope.cu and csrc/flashinfer_rope_binding.cu: 8 headers of include/flashinfer and 338 of
# libcudacxx; the whole of both folders travels so a different host compiler's include path still
# finds its headers).
TREE_PARTS = ("csrc/rope.cu", "csrc/flashinfer_rope_binding.cu", "csrc/tvm_ffi_utils.h", "include/flashinfer/",
              "cccl/libcudacxx/include/")
# Members a Liger wheel must hold for the liger system (bench/peers_liger.py).
LIGER_REQUIRED = ("liger_kernel/__init__.py", "liger_kernel/ops/__init__.py", "liger_kernel/ops/rope.py",
                  "liger_kernel/ops/rms_norm.py", "liger_kernel/ops/utils.py")
TVM_FFI_REQUIRED = ("tvm_ffi/__init__.py", "tvm_ffi/lib/libtvm_ffi.so", "tvm_ffi/include/tvm/ffi/function.h")


def wheel_path(folder, name):
    """The one wheel of `name` at its pinned version in `folder`, or None."""
    version = PINS[name][0]
    found = [f for f in os.listdir(folder) if f.startswith(f"{name}-{version}-") and f.endswith(".whl")]
    return os.path.join(folder, found[0]) if len(found) == 1 else None


def make_tarball(flashinfer_wheel, out):
    """Writes the rope tree (TREE_PARTS of the wheel's flashinfer/data, and its LICENSE) as tar.xz."""
    prefix = "flashinfer/data/"
    count = 0
    with zipfile.ZipFile(flashinfer_wheel) as z, tarfile.open(out, "w:xz") as tar:
        names = sorted(z.namelist())
        licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        for name in names:
            rel = name[len(prefix):] if name.startswith(prefix) else None
            if rel is None or name.endswith("/") or not any(
                    rel == p or (p.endswith("/") and rel.startswith(p)) for p in TREE_PARTS):
                continue
            data = z.read(name)
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            count += 1
        if not licence:
            raise SystemExit(f"stage_peers: {flashinfer_wheel} has no dist-info/licenses/LICENSE")
        data = z.read(licence[0])
        info = tarfile.TarInfo("LICENSE")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return count


def main(argv):
    if argv == ["--requirements"]:
        print("\n".join(pin for _, pin in PINS.values()))
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    downloads, bundle = argv
    missing = [PINS[n][1] for n in PINS if wheel_path(downloads, n) is None]
    if missing:
        print(f"stage_peers: {downloads} lacks (exactly one wheel of) {', '.join(missing)}", file=sys.stderr)
        return 1
    peers = os.path.join(bundle, "peers")
    shutil.rmtree(peers, ignore_errors=True)
    os.makedirs(os.path.join(peers, "wheels"))
    for name in CARRIED_WHEELS:
        shutil.copy(wheel_path(downloads, name), os.path.join(peers, "wheels"))
    count = make_tarball(wheel_path(downloads, "flashinfer_python"), os.path.join(peers, TARBALL))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(peers) for f in fs)
    print(f"stage_peers: {peers}: {len(CARRIED_WHEELS)} wheels, {TARBALL} ({count} files), {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
