"""The one list of operations: the Op record and its formulas (op.py), which ops
a spec has (layers.py), what a step processes (workload.py), number formats
(dtypes.py) and FLOP-counting conventions (conventions.py)."""
