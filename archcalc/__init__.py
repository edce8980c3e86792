"""archcalc: exact sizes, FLOPs, KV cache, speed and fit of Transformer language models.

The package's top level mirrors the commands (api.py): size, roofline, fit,
fit_all_gpus, compare, calibrate, lint, sweep, with the command line's defaults and typed results
that have .to_dict().  The data flow (README): a ModelSpec (spec/) and a
Workload go into ops.layers.model_ops(), which returns the one list of Ops;
cost/, serving/ and report/ consume it.  Names are imported on first use, so
`import archcalc` (and the CLI's cold start) stays cheap.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "size": "archcalc.api", "roofline": "archcalc.api", "fit": "archcalc.api", "fit_all_gpus": "archcalc.api",
    "compare": "archcalc.api", "calibrate": "archcalc.api", "sweep": "archcalc.api", "lint": "archcalc.api",
    "train": "archcalc.api",
    "load": "archcalc.api", "load_gpu": "archcalc.api",
    "InputError": "archcalc.errors",
    "ModelSpec": "archcalc.spec.model",
    "Workload": "archcalc.ops.workload",
    "CONVENTIONS": "archcalc.ops.conventions",
    "model_ops": "archcalc.ops.layers",
    "load_model": "archcalc.spec.catalog",
    "HardwareProfile": "archcalc.hardware.profile",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'archcalc' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return __all__
