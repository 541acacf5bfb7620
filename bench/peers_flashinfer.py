#!/usr/bin/env python3
"""FlashInfer's RoPE ops for bench/peers.py, built from the wheel's own CUDA sources.

Why not `import flashinfer` (measured 2026-11-29 on flashinfer-python 0.7.2.post1): the wheel is
62 MB (426 MB unpacked: data/csrc 258 MB, data/cutlass 39 MB, data/cccl 29 MB, experimental/ 37
MB), and `import flashinfer.rope` runs flashinfer/__init__.py and flashinfer/jit/__init__.py,
which import every kernel family: 493 modules, 125 of them `import cutlass` at module level
(nvidia-cutlass-dsl, whose nvidia-cutlass-dsl-libs-cu13 wheel alone is 92 MB, over the 64 MiB a
device call carries), 7 `import cuda.tile` (cuda-tile) and one `import cudnn`
(nvidia-cudnn-frontend, 11.6 MB, which itself needs nvidia-cutlass-dsl[cu13]); none of these is on
the GPU image (docs: KINDS.md), and the wheel also requires nccl4py and nccl-extensions. So the
Python package cannot travel. Its RoPE kernels can: FlashInfer's JIT builds the rope module from
two .cu files (csrc/rope.cu, csrc/flashinfer_rope_binding.cu) whose headers are
include/flashinfer/ and CCCL's libcudacxx (`nvcc -M`: no CUTLASS, no spdlog), and loads it with
apache-tvm-ffi (a 3.3 MB cp312 wheel). scripts/stage_peers.py packs those files, unchanged, into
gpu-bundle/peers/flashinfer-rope.tar.xz (1.6 MB); here they are compiled with the GPU machine's
nvcc and the flags FlashInfer's JIT gives the rope module (NVCC_FLAGS below, read from that
version's jit/core.py gen_jit_spec, jit/cpp_ext.py and compilation_context.py), loaded with
tvm_ffi.load_module, and called with the arguments flashinfer/rope.py passes (the wrappers below
repeat its few lines of argument preparation, nothing else).

The module is built here too (scripts/gpu-prepare.sh: python3 bench/peers_flashinfer.py --prebuild
--tree DIR --tvm-include DIR --out gpu-bundle/peers/flashinfer-build, about a minute on 2 cores),
which proves the staged tree complete and lets the GPU machine load it instead of spending a
minute of device time: build() takes the prebuilt module only when its key (flags, architecture,
nvcc's version line, sources) is the one the GPU machine computes, and builds there otherwise (or
when it does not load).
"""
import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig

FLASHINFER_VERSION = "0.7.2.post1"
TVM_FFI_VERSION = "0.1.15.post2"
SOURCES = ("csrc/rope.cu", "csrc/flashinfer_rope_binding.cu")
# What the staged tree must hold (the dry run checks these members of the tarball).
TREE_REQUIRED = SOURCES + ("csrc/tvm_ffi_utils.h", "include/flashinfer/pos_enc.cuh",
                           "cccl/libcudacxx/include/cuda/std/cstdint", "LICENSE")
# FlashInfer 0.7.2.post1's JIT flags for the rope module (gen_jit_spec defaults, build_cuda_cflags,
# CompilationContext.COMMON_NVCC_FLAGS); the architecture is added per device.
NVCC_FLAGS = ["-std=c++17", "-DPy_LIMITED_API=0x03090000", "--compiler-options=-fPIC", "--expt-relaxed-constexpr",
              "-static-global-template-stub=false", "-DFLASHINFER_ENABLE_FP8_E8M0", "-DFLASHINFER_ENABLE_FP4_E2M1",
              "-Xfatbin=-compress-all", "--compress-mode=size", "-use_fast_math", "-DFLASHINFER_ENABLE_F16",
              "-DFLASHINFER_ENABLE_BF16", "-DFLASHINFER_ENABLE_FP8_E4M3", "-DFLASHINFER_ENABLE_FP8_E5M2",
              "-DNDEBUG", "-O3"]


def _includes(tree, tvm_include, dlpack_include, cuda_home):
    """FlashInfer's order: vendored CCCL with -I (ahead of the toolkit's), the rest -isystem."""
    flags = ["-I" + os.path.join(tree, "cccl", "libcudacxx", "include")]
    for d in (sysconfig.get_path("include"), os.path.join(cuda_home, "include"), tvm_include, dlpack_include,
              os.path.join(tree, "include"), os.path.join(tree, "csrc")):
        flags += ["-isystem", d]
    return flags


def commands(tree, out, arch, nvcc, tvm_include, dlpack_include, abi=1):
    """([compile commands], link command, .so path) for the rope module."""
    cuda_home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    gencode = f"-gencode=arch=compute_{arch},code=sm_{arch}"
    common = [nvcc] + NVCC_FLAGS + [f"-D_GLIBCXX_USE_CXX11_ABI={abi}", gencode] + _includes(
        tree, tvm_include, dlpack_include, cuda_home)
    objects = [os.path.join(out, os.path.basename(s) + ".o") for s in SOURCES]
    compile_cmds = [common + ["-c", os.path.join(tree, s), "-o", o] for s, o in zip(SOURCES, objects)]
    so = os.path.join(out, "flashinfer_rope.so")
    link = [nvcc, "-shared", gencode] + objects + ["-L" + os.path.join(cuda_home, "lib64"),
                                                    "-L" + os.path.join(cuda_home, "lib64", "stubs"),
                                                    "-lcudart", "-lcuda", "-o", so]
    return compile_cmds, link, so


def _run_all(cmds):
    """Runs commands in parallel; raises with the tail of the first failure's output."""
    with concurrent.futures.ThreadPoolExecutor(len(cmds)) as pool:
        for cmd, proc in zip(cmds, pool.map(lambda c: subprocess.run(c, capture_output=True, text=True), cmds)):
            if proc.returncode != 0:
                raise RuntimeError(f"nvcc failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")


def _key(tree, arch, abi, nvcc):
    """What the module depends on, with no path in it (a module built here with the same nvcc
    version is the one the GPU machine would build): flags, architecture, ABI, nvcc's version line,
    the sources and FlashInfer's version."""
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    key = hashlib.sha256(repr((NVCC_FLAGS, arch, abi, version, FLASHINFER_VERSION)).encode())
    for s in SOURCES + ("csrc/tvm_ffi_utils.h", "include/flashinfer/pos_enc.cuh"):
        with open(os.path.join(tree, s), "rb") as f:
            key.update(f.read())
    return key.hexdigest()


def build(tree, out, arch, nvcc=None, prebuilt=None, includes=None, abi=None):
    """The rope module's .so in `out`: reused when its key matches, else copied from `prebuilt` (a
    folder made by --prebuild on the CPU machine) when that one's key matches, else built with
    nvcc. includes: (tvm_ffi include, dlpack include), default the installed tvm_ffi's. Returns
    (path, how: "cached", "prebuilt" or "built")."""
    if includes is None:
        import tvm_ffi.libinfo  # noqa: PLC0415  (the carried wheel, on the GPU machine)
        includes = (tvm_ffi.libinfo.find_include_path(), tvm_ffi.libinfo.find_dlpack_include_path())
    if abi is None:
        try:
            import torch  # noqa: PLC0415
            abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        except ImportError:
            abi = 1
    nvcc = nvcc or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    compile_cmds, link_cmd, so = commands(tree, out, arch, nvcc, *includes, abi)
    key = _key(tree, arch, abi, nvcc)

    def key_of(folder):
        path = os.path.join(folder, "flashinfer_rope.key")
        return open(path).read() if os.path.exists(path) and os.path.exists(os.path.join(folder, "flashinfer_rope.so")) else None
    if key_of(out) == key:
        return so, "cached"
    os.makedirs(out, exist_ok=True)
    if prebuilt and key_of(prebuilt) == key:
        for name in ("flashinfer_rope.so", "flashinfer_rope.key"):
            shutil.copy(os.path.join(prebuilt, name), out)
        return so, "prebuilt"
    _run_all(compile_cmds)
    _run_all([link_cmd])
    with open(os.path.join(out, "flashinfer_rope.key"), "w") as f:
        f.write(key)
    return so, "built"


class Ops:
    """The rope module's functions with flashinfer/rope.py's argument preparation (0.7.2.post1)."""

    def __init__(self, so):
        import tvm_ffi  # noqa: PLC0415
        self.module = tvm_ffi.load_module(so)

    def cos_sin_cache_inplace(self, positions, query, key, head_size, cos_sin_cache, is_neox):
        """apply_rope_with_cos_sin_cache_inplace: query [T, Hq * D], key [T, Hk * D] views."""
        q = query.view(query.shape[0], -1, head_size)
        k = key.view(key.shape[0], -1, head_size)
        self.module.apply_rope_pos_ids_cos_sin_cache(q, k, q, k, cos_sin_cache, positions, not is_neox)

    def pos_ids_inplace(self, q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta):
        """apply_rope_pos_ids_inplace."""
        self.module.apply_rope_pos_ids(q, k, q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta)

    def llama31_pos_ids_inplace(self, q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta,
                                low_freq_factor, high_freq_factor, old_context_len):
        """apply_llama31_rope_pos_ids_inplace."""
        self.module.apply_llama31_rope_pos_ids(q, k, q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta,
                                               low_freq_factor, high_freq_factor, float(old_context_len))

    def quantize_append(self, torch, q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, caches,
                        kv_indices, kv_indptr, batch_indices, positions, is_neox, quant_scale_q, quant_scale_kv,
                        page_size, q_rope_out, q_nope_out):
        """rope_quantize_fp8_append_paged_kv_cache, NHD, preallocated FP8 q outputs; MLA when k_rope is
        [T, rope_dim] (caches = (ckv_cache, kpe_cache)), else GQA (caches = (k_cache, v_cache))."""
        mla = k_rope.ndim == 2
        fp8 = q_rope_out.dtype
        empty = torch.empty(0, dtype=fp8, device=q_rope.device)
        if mla:
            k_rope, k_nope = k_rope.unsqueeze(1), k_nope.unsqueeze(1)
            v = torch.empty(0, dtype=q_rope.dtype, device=q_rope.device)
            k_cache, v_cache, (ckv_cache, kpe_cache) = empty, empty, caches
        else:
            (k_cache, v_cache), ckv_cache, kpe_cache = caches, empty, empty
        self.module.rope_quantize_append_paged_kv_cache(
            q_rope, k_rope, q_nope, k_nope, v, q_rope_out, q_nope_out, cos_sin_cache, pos_ids, k_cache, v_cache,
            ckv_cache, kpe_cache, kv_indices.int(), kv_indptr.int(), batch_indices.int(), positions.int(),
            0, page_size, quant_scale_q, quant_scale_kv, not is_neox, False)  # 0: TensorLayout.NHD


def make_system(kind, ops, spec, cos_half, sin_half):
    """fn(b, seq_of, seq_index) rotating one set's tensors with a FlashInfer op, or None when the op
    cannot express the spec (n/a). Packed and padded forms: the bias add and the padded scatter
    in torch around the op, as an engine without a fused kernel does (peers_torch._split_qkv)."""
    import torch  # noqa: PLC0415
    from peers_torch import TORCH_DTYPE, _form, _split_qkv  # noqa: PLC0415  (no cycle at import time)
    rope_cfg, rd = spec["rope"], spec["rotary_dim"]
    packed, padded, hq, hkv, d = _form(spec)
    interleave = spec["layout"] == "interleaved"
    rope_type = rope_cfg.get("rope_type", "default")
    io = spec.get("io", {})
    if spec.get("op", "rope") != "rope" or spec.get("qk_norm") or io.get("positions") == "mrope":
        return None  # one position per token, no norm, no other op
    if io.get("output") == "paged_kv" or spec.get("rotary_slice", "leading") != "leading":
        return None  # the fused paged form has its own system (fi_fused)
    if kind == "fi_pos_ids" and rope_type != "default":
        return None
    if kind == "fi_llama31" and rope_type != "llama3":
        return None
    # [10^6, rotary_dim] float32: cos of each pair then sin (HF's float32 angles, times the factor)
    cache = torch.cat([cos_half, sin_half], -1).contiguous() if kind == "fi_cos_sin_cache" else None
    dt = TORCH_DTYPE[spec["dtype"]]

    def rotate(q, k, b):
        if kind == "fi_cos_sin_cache":  # [T, H * D] views (strided rows of a packed qkv stay views)
            ops.cos_sin_cache_inplace(b["positions64"], q.flatten(1), k.flatten(1), d, cache, not interleave)
        elif kind == "fi_pos_ids":
            ops.pos_ids_inplace(q, k, b["positions"], rd, interleave, 1.0, rope_cfg.get("rope_theta", 10000.0))
        else:
            ops.llama31_pos_ids_inplace(q, k, b["positions"], rd, interleave, rope_cfg["factor"],
                                        rope_cfg["rope_theta"], rope_cfg["low_freq_factor"],
                                        rope_cfg["high_freq_factor"], rope_cfg["original_max_position_embeddings"])

    def fn(b, seq_of, seq_index):
        q, k, v = _split_qkv(b, packed, padded, hq, hkv, d)
        rotate(q, k, b)
        if padded:
            for name, src in (("q_out", q), ("k_out", k), ("v_out", v)):
                if name in b:
                    b[name].zero_()
                    b[name][seq_of, :, seq_index] = src.to(dt)
    return fn


def make_fused(ops, spec, cos_half, sin_half, problem, slot_mapping):
    """fn(b, seq_of, seq_index) with rope_quantize_fp8_append_paged_kv_cache for a paged spec whose
    work is that op's: q to an FP8 q_out, k and v (MLA: the latent row) into FP8 caches, no QK-norm,
    the whole head rotated (GQA) or MLA's trailing rope part; else None (n/a). Its page tables
    express the problem's slot_mapping exactly, made once here (not timed): token t is request t
    with one page, kv_indices[t] = slot // page_size, positions[t] = slot % page_size. Scales:
    the op multiplies by quant_scale, ropejit by the float32 reciprocal of its scale: the same."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import peers_reference as ref  # noqa: PLC0415
    io, rd, d = spec.get("io", {}), spec["rotary_dim"], spec["head_dim"]
    mla = ref.op_row(spec).latent_row  # MLA's latent cache row: the op's ckv_cache and kpe_cache
    if (io.get("cache_dtype") != "fp8_e4m3" or io.get("q_output_dtype") != "fp8_e4m3" or spec.get("qk_norm")
            or (not mla and (rd != d or not io.get("copy_v")))):
        return None
    page_size = problem.page_size
    tokens = slot_mapping.shape[0]
    batch_indices = torch.arange(tokens, dtype=torch.int32, device=slot_mapping.device)
    kv_indptr = torch.arange(tokens + 1, dtype=torch.int32, device=slot_mapping.device)
    kv_indices = (slot_mapping // page_size).int()
    positions = (slot_mapping % page_size).int()
    cache = torch.cat([cos_half, sin_half], -1).contiguous()
    fp8 = torch.float8_e4m3fn
    k_scale, v_scale = ref.cache_scales(spec)
    if not mla and k_scale != v_scale:
        return None  # one quant_scale_kv for both
    inv_q, inv_kv = (float(np.float32(1) / np.float32(x)) for x in (ref.Q_SCALE, k_scale))
    is_neox = spec["layout"] != "interleaved"

    def fn(b, seq_of, seq_index):
        q, q_out = b["q"], b["q_out"].view(fp8)
        if mla:  # q = [q_nope | q_pe]; the cache row [kv_c | k_pe] as the op's two caches (strided views)
            rows = b["k_cache"].view(fp8)
            rank = b["kv_c"].shape[-1]
            args = (q[..., d - rd:], b["k_pe"], q[..., :d - rd], b["kv_c"], None, (rows[..., :rank], rows[..., rank:]),
                    q_out[..., d - rd:], q_out[..., :d - rd])
        else:
            empty = q.new_empty(tokens, q.shape[1], 0)
            args = (q, b["k"], empty, b["k"].new_empty(tokens, b["k"].shape[1], 0), b["v"],
                    (b["k_cache"].view(fp8), b["v_cache"].view(fp8)), q_out, q_out.new_empty(tokens, q.shape[1], 0))
        q_rope, k_rope, q_nope, k_nope, v, caches, q_rope_out, q_nope_out = args
        ops.quantize_append(torch, q_rope, k_rope, q_nope, k_nope, v, cache, b["positions64"], caches, kv_indices,
                            kv_indptr, batch_indices, positions, is_neox, inv_q, inv_kv, page_size, q_rope_out,
                            q_nope_out)
    return fn


def load(tree, out, arch, prebuilt=None):
    """Ops of the rope module for sm_<arch> (prebuilt, cached or built from `tree`) and how it was
    had; raises with the reason."""
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")  # torch's own DLPack path, no JIT add-on
    so, how = build(tree, out, arch, prebuilt=prebuilt)
    try:
        return Ops(so), how
    except Exception:
        if how != "prebuilt":
            raise
        os.remove(os.path.join(out, "flashinfer_rope.key"))  # it does not load here: build it here
        return Ops(build(tree, out, arch)[0]), "built (the prebuilt module did not load)"


def main(argv=None):
    p = argparse.ArgumentParser(description="build FlashInfer's rope module here (no GPU needed): proves the "
                                "staged tree complete, and gpu-prepare.sh carries the result so the GPU machine "
                                "skips the build when its nvcc is the same version")
    p.add_argument("--prebuild", action="store_true", required=True)
    p.add_argument("--tree", required=True, help="the unpacked flashinfer-rope tree")
    p.add_argument("--tvm-include", required=True, help="tvm_ffi/include of the apache-tvm-ffi wheel")
    p.add_argument("--out", required=True)
    p.add_argument("--arch", default="90")
    p.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    a = p.parse_args(argv)
    if not os.path.exists(a.nvcc):
        print(f"SKIPPED: no nvcc at {a.nvcc}")
        return 77
    missing = [m for m in TREE_REQUIRED if not os.path.exists(os.path.join(a.tree, m))]
    if missing:
        print(f"flashinfer tree {a.tree} lacks: {', '.join(missing)}", file=sys.stderr)
        return 1
    so, how = build(a.tree, a.out, a.arch, a.nvcc, includes=(a.tvm_include, a.tvm_include), abi=1)
    print(f"FlashInfer rope module for sm_{a.arch}: {so} ({how}, {os.path.getsize(so) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
