"""archcalc: exact sizes, FLOPs and KV-cache bytes of Transformer language models.

The data flow (see README): a ModelSpec and a Workload go into
layers.model_ops(), which returns the one list of Ops; totals sums it.
"""

from archcalc.cost.totals import size
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

__all__ = ["CONVENTIONS", "ModelSpec", "Workload", "load_model", "model_ops", "size"]
