"""Spec.from_hf for a model_type missing from ropejit's family table: the family's pairing, rotary
dim and frequencies read from transformers' own code (_hf_probe), the spec built with them and
checked against HF before it is returned. Nothing is guessed: whatever cannot be read or does not
match is an error naming the model_type and what differs."""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from . import _ropejit

# inv_freq may differ by torch's float32 pow (ropejit takes it correctly rounded): a few ulps.
_FREQ_ULPS = 4


def _fail(model_type: str, why: str, cause: Exception) -> Exception:
    message = (f'"{model_type}" is not in ropejit\'s family table, and its RoPE could not be learned from '
               f"transformers' code: {why}")
    error = _ropejit.SpecError(f"model_type: {message}. ({cause})")
    error.issues = [("model_type", message)]
    return error


def _config_object(original: Any, text: str) -> Any:
    """A transformers config object for the import's input (built from a dict through AutoConfig)."""
    if hasattr(original, "to_dict") and not isinstance(original, dict):
        return original
    from transformers import AutoConfig

    data = json.loads(text)
    model_type = data.pop("model_type", None)
    if not model_type:
        raise ValueError("the config has no model_type")
    return AutoConfig.for_model(model_type, **data)


def mismatch(spec: Any, hf: Any) -> Optional[str]:
    """What differs between a spec and HF's rotation (None when they agree)."""
    if spec.head_dim != hf.head_dim:
        return f"head_dim {spec.head_dim}, HF {hf.head_dim}"
    if spec.layout != hf.layout or spec.rotary_dim != hf.rotary_dim:
        return f"{spec.layout} over {spec.rotary_dim} dims, HF {hf.layout} over {hf.rotary_dim}"
    if bool(spec.to_dict().get("inverse", False)) != getattr(hf, "inverse", False):
        return f"the spec rotates by {'-' if spec.to_dict().get('inverse') else '+'}angle, HF the other way"
    freqs = spec.freqs()
    ours = np.asarray(freqs["inv_freq"], dtype=np.float64)[: len(hf.inv_freq)]
    if len(ours) != len(hf.inv_freq):
        return f"{len(ours)} rotated pairs, HF {len(hf.inv_freq)}"
    nonzero = hf.inv_freq != 0
    step = np.spacing(hf.inv_freq[nonzero].astype(np.float32)).astype(np.float64)
    ulps = np.abs(ours[nonzero] - hf.inv_freq[nonzero]) / step
    if ulps.size and ulps.max() > _FREQ_ULPS:
        return f"inv_freq differs by up to {ulps.max():.3g} ulp"
    if abs(freqs["attention_factor"] - hf.attention_factor) > 1e-6 * max(1.0, hf.attention_factor):
        return f"attention factor {freqs['attention_factor']:.9g}, HF {hf.attention_factor:.9g}"
    return None


def learn_spec(cls: Any, original: Any, text: str, error: Exception, *, dtype: Optional[str],
               layout: Optional[str], name: str, layer_type: Optional[str]) -> Any:
    """The spec of an unknown family, learned and checked; raises SpecError naming what failed."""
    model_type = str(json.loads(text).get("model_type") or "")
    try:
        from . import _hf_probe
    except ImportError as e:  # numpy is a dependency; transformers/torch are not
        raise error from e
    try:
        config = _config_object(original, text)
        hf = _hf_probe.probe(config, layer_type)
    except ImportError:
        raise error from None  # transformers is not installed: the table's refusal stands
    except Exception as e:  # noqa: BLE001 - HF's code failing is the reason to report
        raise _fail(model_type, f"{type(e).__name__}: {e}", error) from None
    if layout is not None and layout != hf.layout:
        raise _fail(model_type, f"layout {layout} was asked, HF pairs {hf.layout}", error)
    spec_obj, warnings = _ropejit.spec_from_hf(text, name, dtype, hf.layout, layer_type or "", True)
    spec = cls(spec_obj, [w for w in warnings if not w.startswith("model_type:")], learned=True)
    if (spec.rotary_dim != hf.rotary_dim and hf.layout is not None) or hf.inverse:  # what the config does not say
        data = spec.to_dict()
        data["rotary_dim"] = hf.rotary_dim
        if hf.inverse:
            data["inverse"] = True
        spec = cls(_ropejit.parse_spec(json.dumps(data)), spec.warnings, learned=True)
    why = mismatch(spec, hf)
    if why:
        raise _fail(model_type, why, error)
    spec.warnings.append(f'model_type: "{model_type}" is not in ropejit\'s family table: learned from '
                         f"{hf.module} ({hf.layout} pairs over {hf.rotary_dim} of {hf.head_dim} dims), "
                         "checked against its rotary module")
    return spec
