"""The model zoo (zoo.py): every rope family of the installed transformers, imported with
Spec.from_hf and run through the kernel, against HF's own rotary module and apply function; the
vision and audio towers with Spec.from_hf(config, tower=...), against the tower's rotary module
and apply function (tower rows: docs/vision-towers.md, "In the zoo").

Fails when a family recorded as matching in tests/data/zoo_expected.json stops matching, when
any family imports wrong (a mismatch), or when a family ropejit refuses has no stated reason.
Prints "M of N rope families match (T of U vision/audio towers)" and the rows per result, and
writes the whole table to build/zoo-table.md.

The rope-type variants (zoo_variants.py) run on one matching row per row kind (every matching
row with ROPEJIT_ZOO_VARIANTS=all, or `python zoo.py --variants`); they fail when a run recorded
as matching in tests/data/zoo_variants_expected.json stops matching, when a mismatch has no
verified cause, or when a non-match has no reason. Table: build/zoo-variants.md."""
import json
import os
import pathlib

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("torch", reason="torch is not installed: the zoo is not run")
pytest.importorskip("transformers", reason="transformers is not installed: the zoo is not run")

import zoo  # noqa: E402
import zoo_variants  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "data" / "zoo_expected.json"
VARIANTS_EXPECTED = ROOT / "tests" / "data" / "zoo_variants_expected.json"


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
        print("  rows: " + ", ".join(f"{n} {result}" for result, n in zoo.counts(rows).items()))
    families = [r for r in rows if r.result != "excluded"]
    assert len(families) > 100, "the zoo found too few families: is the installed transformers complete?"
    towers = [r for r in families if r.path == "tower"]
    assert sum(r.result == "match" for r in towers) >= 40, "too few tower rows match: are the towers run?"


def test_tower_rows_follow_the_tower_tables(rows):
    """Every zoo row of a tower ropejit imports (_vision_specs.TOWERS) matches HF; one of a tower
    it cannot express (REFUSED) is refused naming it; one of a config without a rotary module
    (NO_TOWER) is excluded naming it."""
    from ropejit import _vision_specs as vs

    wrong = [f"{key(r)}: {r.result}: {r.reason}" for r in rows if r.family in vs.TOWERS and r.result != "match"]
    wrong += [f"{key(r)}: {r.result}" for r in rows if r.family in vs.REFUSED
              and (r.result != "refused" or f"'{r.family}'" not in r.reason)]
    wrong += [f"{key(r)}: {r.result}" for r in rows if r.family in vs.NO_TOWER
              and (r.result != "excluded" or f"'{r.family}'" not in r.reason)]
    assert not wrong, "tower rows against the tower tables:\n" + "\n".join(wrong)
    assert {r.family for r in rows if r.path == "tower"} >= set(vs.TOWERS) & {r.family for r in rows}


@pytest.mark.parametrize("change", [{"rows": (1, 0)}, {"placement": "alternating"}, {"layout": "interleaved"}])
def test_a_wrong_tower_form_is_a_mismatch(runtime, monkeypatch, change):
    """The tower check sees a tower form one field off (axis order, placement, pairing)."""
    import dataclasses
    import warnings

    import numpy as np
    from ropejit import _vision_specs as vs
    from transformers import Qwen2VLVisionConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Qwen2VLVisionConfig()
    rng = np.random.default_rng(46)
    assert zoo.check_tower("qwen2_vl_vision", config, runtime, rng).result == "match"
    monkeypatch.setitem(vs.TOWERS, "qwen2_vl_vision", dataclasses.replace(vs.TOWERS["qwen2_vl_vision"], **change))
    row = zoo.check_tower("qwen2_vl_vision", config, runtime, rng)
    assert row.result == "mismatch" and "differs from HF's Qwen2VLVisionRotaryEmbedding" in row.reason, row


@pytest.mark.parametrize("io, reason", [
    ({"positions": "explicit"}, "imported with one position stream; HF's rotary mixes three"),
    ({"mrope_section": [24, 24, 16]}, "differs from HF"),
    ({"mrope_section": [24, 20, 20], "mrope_interleaved": True}, "differs from HF"),
])
def test_a_multimodal_row_off_in_its_streams_is_a_mismatch(runtime, monkeypatch, io, reason):
    """The zoo sees a multimodal text row imported one way off: one stream, other sections, the
    other recomposition (Qwen2-VL's default config: no mrope_section, the rotary's [16, 24, 24])."""
    import warnings

    import numpy as np
    import ropejit
    from transformers import Qwen2VLTextConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Qwen2VLTextConfig()
    rng = np.random.default_rng(47)
    row = zoo.check("qwen2_vl_text", config, None, runtime, rng)
    assert row.result == "match" and "mrope" in row.kind, row
    original = ropejit.Spec.from_hf.__func__

    def changed(cls, *args, **kwargs):
        d = original(cls, *args, **kwargs).to_dict()
        d["io"] = {k: v for k, v in dict(d["io"], **io).items()
                   if io.get("positions") != "explicit" or not k.startswith("mrope")}
        return ropejit.Spec.from_json(d)

    monkeypatch.setattr(ropejit.Spec, "from_hf", classmethod(changed))
    row = zoo.check("qwen2_vl_text", config, None, runtime, rng)
    assert row.result == "mismatch" and reason in row.reason, row


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


@pytest.fixture(scope="module")
def variant_rows(runtime, rows):
    every = os.environ.get("ROPEJIT_ZOO_VARIANTS") == "all"
    result = zoo_variants.run(runtime, rows if every else zoo_variants.subset(rows))
    out = ROOT / os.environ.get("ROPEJIT_BUILD_DIR", "build") / "zoo-variants.md"
    out.write_text(zoo_variants.table(result) + "\n")
    if os.environ.get("ROPEJIT_ZOO_WRITE_EXPECTED") == "1":  # a subset run keeps the other rows' records
        recorded = {} if every or not VARIANTS_EXPECTED.exists() else json.loads(VARIANTS_EXPECTED.read_text())
        recorded.update({zoo_variants.key(r): r.result for r in result})
        VARIANTS_EXPECTED.write_text(json.dumps(recorded, indent=0, sort_keys=True) + "\n")
    return result


def test_variant_summary(rows, variant_rows, capsys):
    with capsys.disabled():
        print(f"\nzoo: {zoo_variants.summary(variant_rows)} (table: build/zoo-variants.md)")
        for name, counts in zoo_variants.counts(variant_rows).items():
            print(f"  {name}: " + ", ".join(f"{n} {result}" for result, n in counts.items() if n))
    ran = {(r.family, r.layer_type) for r in variant_rows}
    kinds = {r.kind for r in rows if r.result == "match" and r.path != "tower"}  # towers: no rope-type variants
    covered = {r.kind for r in rows if (r.family, r.layer_type) in ran}
    assert kinds <= covered, f"row kinds without a variant run: {sorted(kinds - covered)}"
    idle = [name for name, counts in zoo_variants.counts(variant_rows).items() if not counts["match"]]
    assert not idle, f"no run of these variants matches HF: {idle}"


def test_no_unexplained_variant_mismatch(variant_rows):
    wrong = [f"{zoo_variants.key(r)}: {r.reason}" for r in variant_rows if r.result == "mismatch" and not r.explained]
    assert not wrong, "ropejit differs from HF on these variants, for no known cause:\n" + "\n".join(wrong)


def test_every_variant_non_match_has_a_reason(variant_rows):
    silent = [zoo_variants.key(r) for r in variant_rows if r.result != "match" and not r.reason.strip()]
    assert not silent, f"no reason given for: {silent}"


def test_matching_variants_still_match(variant_rows):
    expected = json.loads(VARIANTS_EXPECTED.read_text())
    lost = [f"{zoo_variants.key(r)}: {r.result}: {r.reason}" for r in variant_rows
            if expected.get(zoo_variants.key(r)) == "match" and r.result != "match"]
    assert not lost, "variant runs that matched HF no longer do:\n" + "\n".join(lost)
