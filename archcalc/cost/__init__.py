"""Sums and functions over the op list: sizes (totals.py), time on a device
(roofline.py), several models side by side (compare.py)."""
