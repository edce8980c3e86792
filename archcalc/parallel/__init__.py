"""How an op's parameters, work and cache split across tensor-parallel ranks (tensor.py)."""
