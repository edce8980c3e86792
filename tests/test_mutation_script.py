"""scripts/mutation.py reads mutmut's .meta files as mutmut writes them: exit 1 kills, 0 survives,
None is not yet checked; a survivor listed in equivalent_mutants.toml is accounted for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_counts_what_mutmut_wrote_and_keeps_it_in_the_page(tmp_path, monkeypatch, capsys):
    m = _script()
    (tmp_path / "mutants" / "archcalc").mkdir(parents=True)
    codes = {f"archcalc.ops.layers.x_f__mutmut_{i}": 1 for i in range(18)}
    codes |= {"archcalc.ops.layers.x_f__mutmut_18": 0, "archcalc.ops.layers.x_f__mutmut_19": 0,
              "archcalc.ops.layers.x_f__mutmut_20": None, "archcalc.cost.rates.x_g__mutmut_1": 36}
    (tmp_path / "mutants" / "archcalc" / "x.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    (tmp_path / "eq.toml").write_text('["archcalc.ops.layers.x_f__mutmut_19"]\nreason = "r"\n'
                                      '["archcalc.ops.layers.x_f__mutmut_99"]\nreason = "renumbered"\n')
    page = tmp_path / "mutation.md"
    page.write_text(f"head\n{m.BEGIN}\nold\n{m.END}\ntail\n")
    monkeypatch.setattr(m, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(m, "EQUIVALENT", tmp_path / "eq.toml")
    monkeypatch.setattr(m, "PAGE", page)
    monkeypatch.setattr(sys, "argv", ["mutation.py", "--report", "--write"])
    assert m.main() == 1  # one unlisted survivor
    out = capsys.readouterr().out
    # ops: 18 killed + 1 equivalent of 20 checked (one not checked); cost: a timeout counts as killed
    assert "archcalc.ops              18      1      1       20   95.0%   (1 not checked)" in out
    assert "archcalc.cost              1      0      0        1  100.0%   (1 of the killed by timeout)" in out
    assert "archcalc.ops.layers.x_f__mutmut_18  exit 0" in out and "mutmut_19  exit" not in out
    text = page.read_text()
    assert text.startswith("head\n") and text.endswith(f"{m.END}\ntail\n") and "old" not in text
    assert "x_f__mutmut_18  exit 0" in text
    assert "not a mutant of the current code (renumbered or removed):\n  archcalc.ops.layers.x_f__mutmut_99" in text


def test_saved_results_come_back_as_the_meta_files_mutmut_continues_from(tmp_path, monkeypatch):
    """--save keeps each function's hash and its mutants' codes; --restore writes them back in the
    form mutmut's SourceFileMutationData.load reads (the five keys it pops, nothing else), never over
    a .meta a newer run wrote, and the report reads the same codes as before."""
    m = _script()
    monkeypatch.setattr(m, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(m, "SAVED", tmp_path / "saved.json")
    meta = tmp_path / "mutants" / "archcalc" / "ops" / "op.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"archcalc.ops.op.x_f__mutmut_2": 0, "archcalc.ops.op.x_f__mutmut_1": 1,
             "archcalc.ops.op.xǁCǁg__mutmut_1": None, "archcalc.ops.op.x_f__mutmut_10": 36}
    codes |= {f"archcalc.ops.op.x_f__mutmut_{k}": 1 for k in range(3, 10)}
    meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": {"x_f": "h1", "xǁCǁg": "h2"},
                                "type_check_error_by_key": {}, "durations_by_key": {"t": 1.0},
                                "estimated_durations_by_key": {}}))
    before = m.results()
    assert m.save() == 11
    meta.unlink()
    assert m.restore() == 11
    assert m.results() == before
    restored = json.loads(meta.read_text())
    assert set(restored) == {"exit_code_by_key", "hash_by_function_name", "type_check_error_by_key",
                             "durations_by_key", "estimated_durations_by_key"}
    assert restored["hash_by_function_name"] == {"x_f": "h1", "xǁCǁg": "h2"}
    meta.write_text(json.dumps({"exit_code_by_key": {"archcalc.ops.op.x_f__mutmut_1": 0}}))
    assert m.restore() == 0 and m.results() == {"archcalc.ops.op.x_f__mutmut_1": 0}  # a newer run's file stays


def test_a_gap_in_mutmut_s_numbering_is_refused_not_saved_shifted(tmp_path, monkeypatch):
    """Codes are kept as one list per function, so a missing mutant number would shift every later
    code onto the wrong mutant: save refuses it, naming the mutant."""
    m = _script()
    monkeypatch.setattr(m, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(m, "SAVED", tmp_path / "saved.json")
    meta = tmp_path / "mutants" / "x.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"a.x_f__mutmut_1": 1, "a.x_f__mutmut_3": 0},
                                "hash_by_function_name": {}}))
    with pytest.raises(SystemExit, match="a.x_f__mutmut_3 out of sequence"):
        m.save()
    assert not (tmp_path / "saved.json").exists()
