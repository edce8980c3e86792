"""Rendering only: unit formatting (units.py) and one view per command."""
