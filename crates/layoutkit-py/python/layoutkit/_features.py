"""AutoTVM itervar features of loop-nest IR text (see `layoutkit features --help`)."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from . import _native


def features(ir_text: str, take_log: bool = False) -> List[Dict[str, Any]]:
    """The rows of `GetItervarFeature`, as `layoutkit features --json` prints them: a list of
    dicts with `itervar`, `attr`, `arith` and `touch` (a list of `[buffer_key, values]`).

    Example:
        >>> import layoutkit as lk
        >>> ir = "for (i, 0, 16) {\\n  C[i] = A[i] + B[i]\\n}\\n"
        >>> [r["itervar"] for r in lk.features(ir)]
        ['i']
    """
    return _native.features(ir_text, take_log)


def features_flat(ir_text: str, take_log: bool = True) -> np.ndarray:
    """The flat float32 feature vector in AutoTVM's order (`get_itervar_feature_flatten`)."""
    return np.frombuffer(bytes(_native.features_flat(ir_text, take_log)), dtype="<f4").copy()


def features_names(ir_text: str) -> List[str]:
    """The name of each entry of `features_flat`'s vector."""
    return _native.features_names(ir_text)


def features_curve(ir_text: str, sample_n: int = 30) -> np.ndarray:
    """The curve-sample features (`get_buffer_curve_sample_flatten`), float32."""
    return np.frombuffer(bytes(_native.features_curve(ir_text, sample_n)), dtype="<f4").copy()
