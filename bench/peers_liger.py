"""Liger-Kernel's Triton ops as a peer of bench/peers.py (liger-kernel 0.8.5, carried as a wheel).

The `liger` system is the engine sequence of the torch peers (bench/peers_torch.py: gather cos/sin
per token, QK-norm, rotate, scatter or cache write) with Liger's kernels where it has them:
  rotation   liger_kernel.ops.rope.LigerRopeFunction (HF rotate_half RoPE, rotary_dim leading
             entries rotated, in place on contiguous q/k; strided q/k, such as a packed qkv's views,
             are copied by Liger first and written back here); cos/sin are the model dtype's
             [T, rotary_dim] rows torch gathers (mrope: each pair's stream, as HF builds them)
  QK-norm    liger_kernel.ops.rms_norm.LigerRMSNormFunction over each head (Qwen3: casting mode
             "llama"; Gemma 3, offset 1: "gemma") or over a token's heads together (OLMo 2: "gemma",
             float32 throughout as Olmo2RMSNorm)
  the rest   torch, as the torch peers (bias add, padded scatter, FP8 cache write)
Liger has no interleaved (GPT-J) rotation and no MLA or cache op: those shapes read n/a.

On a machine without torch or triton (the dry run), api_problems() reads the carried wheel's
sources instead: the classes and forward() parameters used here must be there.
"""
import ast
import os

# class -> forward parameters this file passes, by position (liger-kernel 0.8.5).
API = {
    "liger_kernel/ops/rope.py": ("LigerRopeFunction", ["ctx", "q", "k", "cos", "sin", "position_ids",
                                                       "unsqueeze_dim", "rotary_dim"]),
    "liger_kernel/ops/rms_norm.py": ("LigerRMSNormFunction", ["ctx", "X", "W", "eps", "offset", "casting_mode",
                                                              "in_place", "row_mode"]),
}


def api_problems(root):
    """What the liger system needs and the unpacked wheel under `root` lacks (empty: all there)."""
    problems = []
    for rel, (cls, params) in API.items():
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            problems.append(f"{rel} missing")
            continue
        tree = ast.parse(open(path, encoding="utf-8").read())
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        forward = [f for f in (found[0].body if found else []) if isinstance(f, ast.FunctionDef) and f.name == "forward"]
        if not forward:
            problems.append(f"{rel}: no {cls}.forward")
            continue
        got = [a.arg for a in forward[0].args.args]
        if got[:len(params)] != params:
            problems.append(f"{rel}: {cls}.forward({', '.join(got)}), expected ({', '.join(params)})")
    return problems


def unsupported(spec):
    """Why Liger cannot run a spec's rotation, or None."""
    if spec.get("op", "rope") != "rope":
        return f"Liger has no {spec['op']} op"
    if spec["layout"] == "interleaved":
        return "Liger's RoPE rotates halves (neox) only, not interleaved pairs"
    if spec.get("rotary_slice", "leading") != "leading":
        return "Liger's RoPE rotates the leading rotary_dim entries only"
    return None


class Kernels:
    """norm(x, weight) and rotate(q, k, cos, sin) with Liger's ops, for make_torch_rope(kernels=)."""

    def __init__(self, spec):
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # noqa: PLC0415  (GPU machine only)
        from liger_kernel.ops.rope import LigerRopeFunction  # noqa: PLC0415
        self.rope_fn, self.norm_fn = LigerRopeFunction, LigerRMSNormFunction
        self.rd = spec["rotary_dim"]
        norm = spec.get("qk_norm") or {}
        self.all_heads = norm.get("scope", "head") == "all"
        self.eps, self.offset = norm.get("eps", 1e-6), norm.get("weight_offset", 0.0)
        self.casting = "gemma" if self.offset or self.all_heads else "llama"

    def norm(self, x, weight):
        """RMSNorm of x [T, H, D] per head (or per token): a new tensor."""
        import torch  # noqa: PLC0415
        width = x.shape[-2] * x.shape[-1] if self.all_heads else x.shape[-1]
        if weight is None:
            weight = torch.ones(width, dtype=x.dtype, device=x.device)
        y = self.norm_fn.apply(x.reshape(-1, width), weight.reshape(width), self.eps, self.offset, self.casting,
                               False, None)
        return y.view(x.shape)

    def rotate(self, q, k, cos, sin):
        """q [T, Hq, D], k [T, Hk, D] rotated (in place where contiguous); cos, sin [T, 1, rd] of the
        model dtype. Returns the rotated q and k, [T, H, D] (q and k themselves when in place)."""
        c, s = cos.squeeze(1).unsqueeze(0), sin.squeeze(1).unsqueeze(0)  # (1, T, rd)
        q4, k4 = q.unsqueeze(0).transpose(1, 2), k.unsqueeze(0).transpose(1, 2)  # (1, H, T, D) views
        q_out, k_out = self.rope_fn.apply(q4, k4, c, s, None, 1, self.rd)
        return q_out.transpose(1, 2).squeeze(0), k_out.transpose(1, 2).squeeze(0)
