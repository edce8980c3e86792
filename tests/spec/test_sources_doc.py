"""specs/SOURCES.md documents every bundled spec, and the parameter totals it
writes down are the ones archcalc computes.

The table columns are: spec | copied from | archcalc total | third-party total |
difference | status | third-party source.  Numbers are integers with commas,
`—` for none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import archcalc
from archcalc.files import bundled_names

DOC = Path(__file__).resolve().parents[2] / "specs" / "SOURCES.md"
STATUSES = {"confirmed", "confirmed-unlinked", "differs", "none", "synthetic"}
NONE = {"—", "-", ""}


def _int(cell: str) -> int | None:
    cell = cell.strip()
    return None if cell in NONE else int(cell.replace(",", ""))


def _rows() -> dict[str, dict]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("| spec |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 7, f"specs/SOURCES.md: malformed row: {line}"
        name, copied, ours, third, diff, status, by = cells
        assert name not in rows, f"specs/SOURCES.md: {name} has two rows"
        rows[name] = {"copied": copied, "ours": _int(ours), "third": _int(third), "diff": _int(diff),
                      "status": status, "by": by}
    return rows


ROWS = _rows()


def _total(name: str) -> int:
    return archcalc.size(name, context=1).params.total


def test_every_bundled_spec_has_a_row():
    missing = sorted(set(bundled_names("specs")) - set(ROWS))
    assert not missing, f"specs/SOURCES.md has no row for {missing}"


def test_no_row_for_a_spec_that_does_not_exist():
    extra = sorted(set(ROWS) - set(bundled_names("specs")))
    assert not extra, f"specs/SOURCES.md documents specs that are not bundled: {extra}"


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_is_complete(name):
    row = ROWS[name]
    assert row["status"] in STATUSES, f"{name}: status {row['status']!r}"
    assert row["copied"] and row["by"], f"{name}: empty 'copied from' or source cell"
    has_number = row["third"] is not None
    assert has_number == (row["status"] not in {"none", "synthetic"}), \
        f"{name}: status {row['status']} but third-party total {row['third']}"


@pytest.mark.parametrize("name", sorted(ROWS))
def test_archcalc_total_column_is_current(name):
    assert ROWS[name]["ours"] == _total(name), f"{name}: specs/SOURCES.md archcalc total is stale"


@pytest.mark.parametrize("name", sorted(n for n, r in ROWS.items() if r["third"] is not None))
def test_third_party_total_against_ours(name):
    """Confirmed totals equal ours exactly; a differing one differs by the
    documented amount and by nothing else."""
    row, ours = ROWS[name], _total(name)
    if row["status"].startswith("confirmed"):
        assert row["third"] == ours, f"{name}: confirmed {row['third']:,} but archcalc counts {ours:,}"
        assert row["diff"] == 0, f"{name}: confirmed with a non-zero difference"
    else:
        assert row["diff"] not in (None, 0), f"{name}: 'differs' without a difference"
        assert row["third"] - ours == row["diff"], \
            f"{name}: third-party {row['third']:,} - ours {ours:,} != documented {row['diff']:,}"
