"""Which model families ``ropejit.transformers.patch`` runs: for each model_type whose zoo row
matches (tests/data/zoo_expected.json), a tiny random model from its default config (patch_models.py:
shrunk to a few layers and small sizes; the whole model, else its text decoder), its output
unpatched, then patched, and whether the kernel ran and the output stayed HF's. A model whose
rotary mixes several position streams (Qwen2-VL's temporal, height and width) runs twice: with
different rows, as an image's grid gives, and with the text positions it makes itself. Used by
test_patch_report.py (a fixed subset) and by ``python patch_report.py [model_type ...]`` (the
whole zoo: writes build/patch-table.md).

Results: ``patched`` (the kernel ran on every rope layer type, the output is HF's), ``partial``
(the kernel ran, HF keeps some layer types or the multimodal positions, said why),
``declined`` (HF keeps every layer, said why), ``no call`` (patched, but the forward pass never
reached the kernel), ``mismatch`` (the patched output differs from HF's: a bug), ``error``
(neither the model nor its text decoder builds and runs unpatched: transformers' side, the
reason quotes HF for each way tried)."""
from __future__ import annotations

import json
import logging
import os
import pathlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model here is built from a config

import torch  # noqa: E402

import ropejit  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
import ropejit.transformers as rope_hf  # noqa: E402
from patch_models import NUDGE, TOLERANCE, Tiny, output, relative, short, tiny  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "data" / "zoo_expected.json"


@dataclass
class Row:
    """One model_type: what patching its tiny model did."""

    family: str
    result: str = "patched"
    reason: str = ""
    model: str = ""
    calls: Dict[str, int] = field(default_factory=dict)   # kernel calls per layer type
    seconds: float = 0.0


def families(path: pathlib.Path = EXPECTED) -> List[str]:
    """The model_types with a matching zoo row (any of their layer types)."""
    expected = json.loads(path.read_text())
    return sorted({key.split("/")[0] for key, result in expected.items() if result == "match"})


def check(family: str, config: object) -> Row:
    """Patches the tiny model of one family and compares its output with HF's."""
    row = Row(family)
    try:
        found = tiny(config)
    except Exception as e:  # noqa: BLE001 - transformers' side: the tiny model does not build or run
        row.result, row.reason = "error", f"the tiny model does not build or run unpatched: {short(e, 600)}"
        return row
    row.model = type(found.model).__name__ + (" (text decoder)" if found.what.startswith("text decoder") else "")
    state = rope_hf.patch(found.model)
    try:
        if state.reason is not None:
            row.result, row.reason = "declined", state.reason
            return row
        _compare(row, found, state)
        return row
    finally:
        rope_hf.unpatch(found.model)


def _compare(row: Row, found: Tiny, state: rope_hf.RopePatch) -> None:
    """Runs the patched forward passes (text positions first, then the multimodal ones) and fills
    the row's result from their outputs and kernel calls."""
    tolerance = max(TOLERANCE, 10 * found.floor)
    runs = [("text positions", found.text_kwargs, found.text_want)] if found.text_kwargs is not None else []
    runs.append((f"{found.streams} position streams" if found.streams > 1 else "", found.kwargs, found.want))
    multimodal_calls = 0
    for name, kwargs, want in runs:
        before = state.kernel_calls
        try:
            got = output(found.model, kwargs)
        except Exception as e:  # noqa: BLE001 - the patched forward failing is a finding
            row.result, row.reason = "mismatch", f"the patched forward failed: {type(e).__name__}: {short(e)}"
            return
        error = relative(got, want)
        if not error <= tolerance:
            row.result, row.reason = "mismatch", f"patched output{' (' + name + ')' if name else ''} differs " \
                f"from HF's by {error:.3g} (relative)"
            return
        multimodal_calls = state.kernel_calls - before
    row.calls = dict(state.kernel_calls_by_type)
    why = "; ".join(f"{k}: {v}" for k, v in state.fallback_reasons.items())
    notes = []
    if state.kernel_calls == 0:
        row.result = "no call"
        why = why or "HF's apply functions never got a cos of the patched rotary module"
        notes.append(f"the forward pass never reached the kernel ({state.fallback_calls} fallback calls: {why})")
    elif state.declined:
        row.result = "partial"
        notes.append("HF keeps " + "; ".join(f"{k}: {v}" for k, v in state.declined.items()))
    elif found.streams > 1 and multimodal_calls == 0:
        row.result = "partial"
        why = "; ".join(f"{k}: {v}" for k, v in state.text_positions_only.items()) or why or "no kernel call"
        notes.append(f"HF keeps the {found.streams} different position rows ({why}); the text positions ran "
                     "the kernel")
    elif found.streams > 1:
        notes.append(f"{found.streams} different position rows and the text positions ran the kernel")
    if tolerance > TOLERANCE:
        notes.append(f"compared within {tolerance:.2g}: HF's own output moves by {found.floor:.2g} when its cos/sin "
                     f"turn by {NUDGE:.2g} rad")
    row.reason = "; ".join(notes + [note for note in (found.note, state.note) if note])


def run(only: Optional[List[str]] = None) -> List[Row]:
    """A row for every family with a matching zoo row (or the ones in `only`)."""
    logging.disable(logging.WARNING)  # transformers warns about most default configs
    try:
        return _run(only)
    finally:
        logging.disable(logging.NOTSET)


def _run(only: Optional[List[str]]) -> List[Row]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in only or families():
            start = time.perf_counter()
            try:
                config = CONFIG_MAPPING[family]()
            except Exception as e:  # noqa: BLE001
                row = Row(family, "error", f"the default config does not build: {short(e)}")
            else:
                row = check(family, config)
            row.seconds = time.perf_counter() - start
            rows.append(row)
    return rows


def summary(rows: List[Row]) -> str:
    """"N of M families patch and run the kernel"."""
    ran = [r for r in rows if r.result in ("patched", "partial")]
    partial = sum(r.result == "partial" for r in rows)
    return (f"{len(ran)} of {len(rows)} families patch and run the kernel"
            + (f" ({partial} partly: HF keeps some layer types or the multimodal positions)" if partial else ""))


def table(rows: List[Row]) -> str:
    """The markdown table of the rows, with the summary and the count per result on top."""
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r.result] = counts.get(r.result, 0) + 1
    lines = [summary(rows), "", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), "",
             "(error: transformers' side, before any patch: neither the model nor its text decoder builds and "
             "runs from the default config shrunk; the reason quotes HF for each way tried.)", "",
             "| family | model | result | kernel calls | s | reason |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        calls = ", ".join(f"{k} {v}" for k, v in sorted(r.calls.items())) or "-"
        lines.append(f"| {r.family} | {r.model or '-'} | {r.result} | {calls} | {r.seconds:.1f} "
                     f"| {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


def write(rows: List[Row]) -> pathlib.Path:
    """Writes the table to build/patch-table.md (ROPEJIT_BUILD_DIR instead of build); returns the path."""
    out = ROOT / os.environ.get("ROPEJIT_BUILD_DIR", "build") / "patch-table.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table(rows) + "\n")
    return out


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("PATCH_REPORT_THREADS", "1")))
    rope_torch.set_runtime(ropejit.Runtime("host", cache_dir=os.environ.get("ROPEJIT_CACHE_DIR")))
    result = run(sys.argv[1:] or None)
    path = write(result)
    print(table(result))
    print(f"\n{summary(result)} (table: {path})")
