"""The patch report (patch_report.py) on a fixed representative subset of the zoo's families:
one rope block (Llama, Phi's partial rotary, DeepSeek V3's interleaved MLA), per layer type
(Gemma 3, OLMo 3, ModernBERT, Gemma 4 with proportional rope), the one-tensor apply form (Gemma
3n), a composite model (Gemma 3 with its vision tower), multimodal positions (Qwen2-VL whole,
Qwen3-VL's text decoder, whose composite model does not build shrunk, with its interleaved
sections; NeoMME's two streams, whose rows that differ no spec follows: they run from HF's own
cos and sin), GraniteSWA (a
rotary module per layer theta) and Qwen4-Exp (its attention takes a slice of cos's tokens).
Each tiny model's output patched is compared with HF's own unpatched.

The whole zoo takes longer (a kernel compile per family, about a minute warm): run it with
``python patch_report.py``, which writes build/patch-table.md."""
import os
import pathlib

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("torch", reason="torch is not installed: the patch report is not run")
pytest.importorskip("transformers", reason="transformers is not installed: the patch report is not run")

import patch_report  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402

# family → what the patch must do with its tiny model
SUBSET = {
    "llama": "patched", "phi": "patched", "deepseek_v3": "patched", "gpt_oss": "patched",
    "gemma3_text": "patched", "olmo3": "patched", "modernbert": "patched", "gemma4_text": "patched",
    "gemma3n_text": "patched", "gemma3": "patched", "qwen2_vl": "patched", "qwen3_vl": "patched",
    "neomme": "patched", "granite_swa": "patched", "qwen4_exp_text": "patched",
}


@pytest.fixture(scope="module")
def rows(runtime):
    rope_torch.set_runtime(runtime)
    result = patch_report.run(list(SUBSET))
    out = patch_report.ROOT / os.environ.get("ROPEJIT_BUILD_DIR", "build") / "patch-table-subset.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(patch_report.table(result) + "\n")
    return result


def test_summary(rows, capsys):
    with capsys.disabled():
        print(f"\npatch report (subset): {patch_report.summary(rows)} (table: build/patch-table-subset.md)")
    assert [r.family for r in rows] == list(SUBSET)


def test_each_family_does_what_it_should(rows):
    wrong = [f"{r.family}: {r.result} ({r.reason}), expected {SUBSET[r.family]}" for r in rows
             if r.result != SUBSET[r.family]]
    assert not wrong, "\n".join(wrong)


def test_patched_families_ran_the_kernel_on_every_layer_type(rows):
    for r in rows:
        if r.result == "patched":
            assert r.calls and all(n > 0 for n in r.calls.values()), r
    per_type = {r.family: set(r.calls) for r in rows}
    assert per_type["gemma3"] == per_type["gemma4_text"] == {"sliding_attention", "full_attention"}


def test_multimodal_families_ran_the_kernel_on_different_position_rows(rows):
    by_family = {r.family: r for r in rows}
    for family in ("qwen2_vl", "qwen3_vl"):
        assert "3 different position rows and the text positions ran the kernel" in by_family[family].reason
    assert "2 different position rows and the text positions ran the kernel" in by_family["neomme"].reason
    assert by_family["qwen3_vl"].model == "Qwen3VLTextModel (text decoder)"


def test_every_other_result_says_why(rows):
    silent = [r.family for r in rows if r.result != "patched" and not r.reason.strip()]
    assert not silent, f"no reason given for: {silent}"


def test_the_families_come_from_the_zoo_table():
    listed = patch_report.families()
    assert set(SUBSET) <= set(listed) and len(listed) > 100
    assert pathlib.Path(patch_report.EXPECTED).is_file()
