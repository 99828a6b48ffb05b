"""Numbers a host library computes from one batch: scikit-learn's scores
(`mean_absolute_error(y, pred)`, not its arrays and reports) and NumPy's reductions over a
whole array (`np.mean(errors)`). MIG031 all-reduces them as numbers (metric_values.py): they
are never tensors to gather (`gather_for_metrics` of a float is a list)."""

from __future__ import annotations

import ast

# scikit-learn's metrics that return one number (the others return arrays, curves, text)
NOT_SCORES = {
    "confusion_matrix",
    "multilabel_confusion_matrix",
    "classification_report",
    "precision_recall_curve",
    "roc_curve",
    "det_curve",
    "precision_recall_fscore_support",
}
NUMPY_REDUCTIONS = {"mean", "sum", "average", "median", "std", "var", "max", "min", "nanmean"}


def host_score(callee: str, call: ast.Call) -> bool:
    """`mean_absolute_error(y, pred)`, `np.mean(errors)`: a number computed on the host from
    this process's batch (never a tensor to gather: `gather_for_metrics` of a float is a
    list)."""
    module, _, name = callee.rpartition(".")
    if module.startswith("sklearn.metrics"):
        return name not in NOT_SCORES
    axis = any(k.arg == "axis" for k in call.keywords) or len(call.args) > 1
    return module == "numpy" and name in NUMPY_REDUCTIONS and not axis
