"""The model zoo (zoo.py): every rope family of the installed transformers, imported with
Spec.from_hf and run through the kernel, against HF's own rotary module and apply function.

Fails when a family recorded as matching in tests/data/zoo_expected.json stops matching, when
any family imports wrong (a mismatch), or when a family ropejit refuses has no stated reason.
Prints "M of N rope families match" and writes the whole table to build/zoo-table.md."""
import json
import os
import pathlib

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("torch", reason="torch is not installed: the zoo is not run")
pytest.importorskip("transformers", reason="transformers is not installed: the zoo is not run")

import zoo  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "data" / "zoo_expected.json"


def key(row):
    return f"{row.family}/{row.layer_type}"


@pytest.fixture(scope="module")
def rows(runtime):
    result = zoo.run(runtime)
    table = zoo.table(result)
    out = ROOT / os.environ.get("ROPEJIT_BUILD_DIR", "build") / "zoo-table.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table + "\n")
    if os.environ.get("ROPEJIT_ZOO_WRITE_EXPECTED") == "1":  # after a reviewed change of the zoo
        EXPECTED.write_text(json.dumps({key(r): r.result for r in result}, indent=0, sort_keys=True) + "\n")
    return result


def test_zoo_summary(rows, capsys):
    with capsys.disabled():
        print(f"\nzoo: {zoo.summary(rows)} (table: build/zoo-table.md)")
    families = [r for r in rows if r.result != "excluded"]
    assert len(families) > 100, "the zoo found too few families: is the installed transformers complete?"


def test_no_family_imports_wrong(rows):
    wrong = [f"{key(r)}: {r.reason}" for r in rows if r.result == "mismatch"]
    assert not wrong, "ropejit imports these families wrong:\n" + "\n".join(wrong)


def test_every_non_match_has_a_reason(rows):
    silent = [key(r) for r in rows if r.result != "match" and not r.reason.strip()]
    assert not silent, f"no reason given for: {silent}"


def test_matching_families_still_match(rows):
    expected = json.loads(EXPECTED.read_text())
    now = {key(r): r for r in rows}
    lost = [f"{k}: {now[k].result}: {now[k].reason}" if k in now else f"{k}: gone from the zoo"
            for k, result in expected.items() if result == "match" and (k not in now or now[k].result != "match")]
    assert not lost, "families that matched HF no longer do:\n" + "\n".join(lost)
