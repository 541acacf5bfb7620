"""Fixtures and checks the vLLM tests share (test_vllm.py, test_vllm_classes.py); imported after
those modules' importorskip of torch and vLLM."""
import pytest
import torch

import ropejit.torch as rope_torch
from ropejit import compat, vllm_plugin
from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
import vllm.model_executor.layers.rotary_embedding as vllm_rope


@pytest.fixture(autouse=True)
def vllm_context(runtime, monkeypatch):
    """A CPU vLLM config (CustomOps need one), ropejit's host runtime, a fresh get_rope cache."""
    rope_torch.set_runtime(runtime)
    monkeypatch.setattr(vllm_rope, "_ROPE_DICT", {})
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        yield
    vllm_plugin.unregister()


def assert_close(got, want, dtype):
    tol = {torch.float32: 2e-6, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * want.abs().max().item())


@pytest.fixture
def launches(monkeypatch):
    """The positions of each ropejit kernel launch through compat's cos_sin_cache ops."""
    seen = []
    real = compat.kernel_for

    def spy(spec_json, device):
        kernel = real(spec_json, device)
        return lambda q, k, **arrays: seen.append(arrays["positions"].clone()) or kernel(q, k, **arrays)

    monkeypatch.setattr(compat, "kernel_for", spy)
    return seen


@pytest.fixture
def plugin(monkeypatch):
    """ropejit's plugin registered (vllm_context unregisters it)."""
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    vllm_plugin.register()


def spread(tokens, below, top, seed):
    """`tokens` random positions in [0, top), some below `below` and some at or above it."""
    positions = torch.randint(0, top, (tokens,), generator=torch.Generator().manual_seed(seed))
    positions[:2] = torch.tensor([below - 1, below])
    return positions


def compare(method, native, positions, query, key, dtype, *offsets, inplace=True):
    """`method`'s result equals `native`'s (vLLM's forward) on fresh copies; in place where vLLM's kernel
    writes in place, else query and key untouched."""
    want_q, want_k = native(positions, query.clone(), key.clone(), *offsets)
    q, k = query.clone(), key.clone()
    got_q, got_k = method(positions, q, k, *offsets)
    assert (got_q is q and got_k is k) if inplace else (torch.equal(q, query) and torch.equal(k, key))
    assert_close(got_q, want_q.to(dtype), dtype)
    assert_close(got_k, want_k.to(dtype), dtype)
