"""The exporter: a `ByteNet` as a TensorFlow Serving SavedModel that translates strings.

In: a trained `ByteNet` (any precision policy). Out: `EXPORT_DIR/<version>/saved_model.pb` (+
variables), with the signature `serving_default`: input `source` tf.string `(None,)`, output
`translation` tf.string `(None,)`. `<version>` is one more than the largest integer version
already in `EXPORT_DIR` (1 for the first), and a version directory appears only once it is
complete.

The serving graph uses core TF ops only (`tf.strings`, `tf.io.decode_raw`), so it loads in a
process that imports nothing but tensorflow. It never fails on an input string: empty strings,
NUL bytes and invalid UTF-8 translate like any other bytes, and an input longer than
`max_length - 1` bytes (`model.max_length` counts the EOS) is truncated to its first
`max_length - 1` bytes before translation. The model is exported with float32 weights and
the `cpu` ops policy, whatever it was trained with: stock TensorFlow ops that fuse each bias
into its matrix product and run the encoder's dilated convolutions as single convolutions
(`bytenet_tf.ops`; the same translations as the `reference` policy, which `ops_policy` still
exports, and faster on a CPU). It computes in
float32 unless `precision="bfloat16"`: then its weights are stored and used in bfloat16 (the
values that mixed-precision training computes with; logits and beam scores stay float32),
which decodes faster on CPUs with native bfloat16 and can choose other bytes than float32 where
two candidates are close. The choice is recorded in `assets.extra`.

An export records a fingerprint of its weights and options in `assets.extra/bytenet_config.json`;
exporting the same weights with the same options again returns the newest version instead of
writing an identical one (a TF Serving that watches the base would reload it for nothing).
"""

import hashlib
import json
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from bytenet_tf.decoding import DEFAULT_LENGTH_PENALTY
from bytenet_tf.inference import Translator, resolve_saved_model
from bytenet_tf.models.bytenet import ByteNet


PRECISIONS = ("float32", "bfloat16")
# Ops policies a SavedModel may hold: stock TensorFlow ops only (`bytenet_tf.ops`).
SERVING_OPS = ("reference", "cpu")


def serving_copy(model, precision="float32", ops_policy="cpu"):
    """A `ByteNet` with `model`'s configuration and weights, on the ops `ops_policy` (one of
    `SERVING_OPS`), computing in `precision` (one of `PRECISIONS`), with its weights in that
    dtype.

    Raises:
        ValueError: an unknown precision or ops policy, naming the choices.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {', '.join(PRECISIONS)}. Received: "
                         f"precision={precision!r}")
    if ops_policy not in SERVING_OPS:
        raise ValueError(f"`ops_policy` must be one of {', '.join(SERVING_OPS)}. Received: "
                         f"ops_policy={ops_policy!r}")
    config = model.get_config()
    config["dtype"] = precision
    config["ops_policy"] = ops_policy
    clone = ByteNet.from_config(config)
    clone.build()
    clone.set_weights([tf.convert_to_tensor(w) for w in model.get_weights()])
    return clone


def float32_copy(model):
    """A float32 `ByteNet` with `model`'s configuration and weights, on the reference ops."""
    return serving_copy(model, "float32", "reference")


def next_version(export_dir):
    """One more than the largest integer version directory in `export_dir` (1 if none)."""
    versions = [int(name) for name in (os.listdir(export_dir) if os.path.isdir(export_dir) else [])
                if name.isdigit()]
    return max(versions, default=0) + 1


def fingerprint(model, **options):
    """SHA-256 of what an export of `model` serves: its config, weights (as float32), `options`.

    The dtype policy and ops policy are left out of the config; a bfloat16 export differs from a
    float32 one by its `precision` option, and an export on the `cpu` ops from one on the
    `reference` ops by its `ops_policy` option.
    """
    config = {k: v for k, v in model.get_config().items() if k not in ("dtype", "ops_policy")}
    digest = hashlib.sha256(json.dumps([config, options], sort_keys=True, default=str).encode())
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _newest_export_fingerprint(export_dir):
    try:
        newest = resolve_saved_model(export_dir)
        with open(os.path.join(newest, "assets.extra", "bytenet_config.json")) as f:
            return newest, json.load(f).get("fingerprint")
    except (FileNotFoundError, ValueError):
        return None, None


def export_saved_model(model, export_dir, beam_size=1, length_alpha=DEFAULT_LENGTH_PENALTY,
                       jit_compile=False, version=None, precision="float32",
                       ops_policy="cpu"):
    """Exports `model` as a translating SavedModel under `export_dir/<version>/`.

    Args:
        model: a `ByteNet`, any precision and ops policy.
        export_dir: the export base.
        beam_size, length_alpha, jit_compile: see `bytenet_tf.inference.Translator`.
        version: int, or None for one more than the largest version there. With None, if the
            newest version holds the same weights and options, nothing is written.
        precision: "float32" (the default) or "bfloat16" (see the module docstring).
        ops_policy: one of `SERVING_OPS`, how the SavedModel computes (see the module
            docstring).

    Returns:
        The version directory's path (the existing one when nothing was written).
    """
    options = {"beam_size": beam_size, "length_alpha": length_alpha, "jit_compile": jit_compile}
    if precision != "float32":  # float32 exports keep the fingerprints they always had
        options["precision"] = precision
    if ops_policy != "reference":  # and so do exports on the reference ops
        options["ops_policy"] = ops_policy
    export_print = fingerprint(model, **options)
    if version is None:
        newest, newest_print = _newest_export_fingerprint(export_dir)
        if newest_print == export_print:
            logging.info("The newest export %s holds these weights and options already; "
                         "not exporting a copy.", newest)
            return newest
    version = next_version(export_dir) if version is None else int(version)
    final = os.path.join(export_dir, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final} already exists; export to a new version.")
    staging = os.path.join(export_dir, f".tmp-{version}")
    shutil.rmtree(staging, ignore_errors=True)
    translator = Translator(serving_copy(model, precision, ops_policy), beam_size, length_alpha,
                            jit_compile)
    tf.saved_model.save(translator, staging,
                        signatures={"serving_default": translator.translate})
    extra = os.path.join(staging, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, "bytenet_config.json"), "w") as f:
        json.dump({"model": model.get_config(), **options, "fingerprint": export_print}, f,
                  indent=2, default=str)
    os.replace(staging, final)
    return final
