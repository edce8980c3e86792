"""Devices: HardwareProfile and the bundled profiles (profile.py)."""
