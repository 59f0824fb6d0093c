"""The numerical kernels of ByteNet behind one small interface, chosen by an explicit policy.

Every layer computes through an ops object with six methods (see `ReferenceOps`):
`dilated_conv`, `dense`, `selu` (optionally zeroing masked positions), `alpha_dropout`,
`selu_alpha_dropout_dense` (the tail of a SELU residual block, which a policy may fuse) and
`residual` (a block's rescaled sum). The policies:

| policy | what | where |
|---|---|---|
| `reference` | `keras.ops`, written for clarity (`reference.py`) | any backend and device; the default of `build_model`, and what SavedModels hold |
| `cpu` | TensorFlow ops arranged for oneDNN/Eigen: hand-written conv gradients, float32 SELU for bfloat16, 16-bit dropout masks (`cpu.py`) | CPU |
| `cpu_fused` | `cpu` plus compiled kernels for training: SELU + AlphaDropout, SELU + padding mask, the rescaled residual sum, a bfloat16 product's bias (`cpu.py`, `kernels/`) | CPU with a C++ compiler |

All three compute the same function (tested on every zoo model, values and gradients, dropout
off); they drop different units from the same seed. A model takes its policy as the
constructor argument `ops_policy`. How a model is computed on this machine is a run-time choice,
not part of the model: no layer puts `ops_policy` in its `get_config`, so a model rebuilt from
a saved config computes with `reference` until it is given another policy.
`bytenet-train --ops_policy=auto` picks one with `resolve_policy`, logs why and records it in
`config.json` (`effective_ops_policy`), beside the model's config.
"""

import os

import keras
from absl import logging

from bytenet_tf.ops.reference import ReferenceOps

POLICIES = ("reference", "cpu", "cpu_fused")
AUTO = "auto"
# Sets what `auto` resolves to, e.g. BYTENET_TF_OPS_POLICY=reference on a machine where the
# compiled kernel misbehaves. An explicit policy is never overridden.
ENVIRONMENT_VARIABLE = "BYTENET_TF_OPS_POLICY"

_instances = {}


def _check_name(policy, choices):
    if policy not in choices:
        raise ValueError(f"ops_policy={policy!r} is unknown; choose one of: {', '.join(choices)}")


def get(policy):
    """The ops object of `policy` (one instance per process); `cpu_fused` loads its kernel.

    Raises:
        ValueError: `policy` is unknown, a CPU policy under a Keras backend other than
            TensorFlow, or `cpu_fused` cannot load its kernel here.
    """
    _check_name(policy, POLICIES)
    backend = keras.backend.backend()
    if policy != "reference" and backend != "tensorflow":
        raise ValueError(f"ops_policy={policy!r} is written in TensorFlow ops and runs under the "
                         f"TensorFlow backend only; Keras runs on {backend!r} here "
                         "(KERAS_BACKEND). Use ops_policy='reference'.")
    if policy not in _instances:
        if policy == "reference":
            _instances[policy] = ReferenceOps()
        else:
            from bytenet_tf.ops import cpu, kernels

            try:
                _instances[policy] = cpu.CpuOps() if policy == "cpu" else cpu.CpuFusedOps()
            except kernels.KernelUnavailableError as error:
                raise ValueError(f"ops_policy='cpu_fused' is unavailable: {error}. Or choose "
                                 "ops_policy='cpu' (no compiled kernel).") from error
    return _instances[policy]


def _accelerator():
    import tensorflow as tf

    for kind in ("GPU", "TPU"):
        if tf.config.list_physical_devices(kind):
            return kind
    return None


def resolve_policy(policy=AUTO, accelerator=None):
    """Returns `(policy, reason)` for a requested policy, ready to use (kernel loaded).

    `auto` takes `$BYTENET_TF_OPS_POLICY` when it is set; otherwise `reference` under a Keras
    backend other than TensorFlow (the CPU policies are TensorFlow ops), or when a GPU or TPU is
    present (cuDNN and XLA run the stock ops well, and the CPU paths would only move work
    off the accelerator), else `cpu_fused`, or `cpu` when the kernel cannot be built (the reason
    is returned, and logged as a warning). An explicit policy is checked and returned as it is.

    Args:
        policy: `auto` or one of `POLICIES`.
        accelerator: `"GPU"`, `"TPU"`, `""` for none, or None to look.

    Raises:
        ValueError: unknown policy, a CPU policy with an accelerator present, or `cpu_fused`
            without its kernel.
    """
    _check_name(policy, (AUTO,) + POLICIES)
    backend = keras.backend.backend()
    if policy == AUTO and backend != "tensorflow":
        return "reference", f"the Keras backend is {backend}"
    accelerator = _accelerator() if accelerator is None else accelerator
    if policy == AUTO:
        chosen = os.environ.get(ENVIRONMENT_VARIABLE)
        if chosen:
            _check_name(chosen, POLICIES)
            policy, reason = chosen, f"{ENVIRONMENT_VARIABLE}={chosen}"
        elif accelerator:
            return "reference", f"a {accelerator} is present"
        else:
            try:
                get("cpu_fused")
                return "cpu_fused", "CPU only, fused kernel built"
            except ValueError as error:
                logging.warning("bytenet_tf: ops_policy=auto falls back to the slower 'cpu' "
                                "policy: %s", error)
                return "cpu", f"CPU only; {error}"
    else:
        reason = "requested"
    if policy != "reference" and accelerator:
        raise ValueError(f"ops_policy={policy!r} runs on CPU only, but a {accelerator} is "
                         "present; use ops_policy='reference'.")
    get(policy)
    return policy, reason
