"""archcalc.measure: the only part of archcalc that imports torch (kernels, the reference model)."""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("archcalc.measure needs torch: pip install 'archcalc[measure]'") from exc
