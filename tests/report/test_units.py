"""The unit formatter every view uses: GiB = 2^30 (IEC), GB = 10^9 (SI)."""

from archcalc.report.units import binary, nbytes


def test_binary_units_and_signs():
    assert binary(1536 * 2**20) == "1.50 GiB"
    assert binary(2**40) == "1.00 TiB"
    assert binary(1023) == "1023 B"
    assert binary(-1.5 * 2**30) == "-1.50 GiB"  # a headroom below zero reads as what is missing
    assert nbytes(2**30) == "1.00 GiB = 1.07 GB"
