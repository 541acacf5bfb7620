"""docs/accuracy.md's script as a check: every quantized output ropejit writes (FP8 q in each
scale mode, FP8 and NVFP4 caches) within half a step of the exact value plus float32 noise; the
script exits 1 naming the first case past it. A short run (64 tokens, another seed)."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "accuracy_table.py"


def test_every_format_and_mode_within_half_a_step():
    run = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "64", "--seed", "5"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| fp8") or line.startswith("| nvfp4")]
    assert len(rows) == 20, run.stdout                     # 2 models x (8 FP8 + 1 NVFP4) + 2 per-token rows
    assert all("nan" not in row for row in rows), run.stdout
