"""scripts/mutation.py reads mutmut's .meta files as mutmut writes them: exit 1 kills, 0 survives,
None is not yet checked; a survivor listed in equivalent_mutants.toml is accounted for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

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
    (tmp_path / "eq.toml").write_text('["archcalc.ops.layers.x_f__mutmut_19"]\nreason = "r"\n')
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
