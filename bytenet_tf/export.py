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
`max_length - 1` bytes before translation. The model is exported in float32 whatever policy it
was trained with.
"""

import json
import os
import shutil

import tensorflow as tf

from bytenet_tf import decoding
from bytenet_tf.models.bytenet import ByteNet
from pipelines import byte_codec


def float32_copy(model):
    """A float32 `ByteNet` with `model`'s configuration and weights."""
    config = model.get_config()
    config["dtype"] = "float32"
    clone = ByteNet.from_config(config)
    clone.build()
    clone.set_weights([tf.convert_to_tensor(w) for w in model.get_weights()])
    return clone


def source_ids(strings, max_length):
    """Encodes `(batch,)` strings as EOS-framed int32 ids `(batch, S)`, truncated to fit."""
    ids = byte_codec.encode(strings)[:, :max_length - 1]
    eos = tf.fill([ids.nrows(), 1], byte_codec.EOS_ID)
    return tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor(byte_codec.PAD_ID)


class Translator(tf.Module):
    """Strings in, strings out: encode, decode (greedy or beam), and decode bytes.

    Args:
        model: a float32 `ByteNet`.
        beam_size: int, 1 for greedy decoding.
        length_alpha: float, beam search length normalization.
        jit_compile: bool, compile the integer-only decoding loop with XLA (no strings reach
            XLA). XLA compiles once per distinct input shape `(batch, padded length)`, so this
            suits servers that batch to a few fixed shapes.
    """

    def __init__(self, model, beam_size=1, length_alpha=0.6, jit_compile=False):
        super().__init__(name="translator")
        self.model = model
        self.beam_size = beam_size
        self.length_alpha = length_alpha
        # XLA needs a static output width: the unfolding bound of the longest accepted source.
        self.capacity = (model.max_output_length(model.max_length - 1) + decoding.DEFAULT_MARGIN
                         if jit_compile else None)
        self._decode_ids = tf.function(self._decode_ids_python, jit_compile=jit_compile)

    def _decode_ids_python(self, ids):
        if self.beam_size == 1:
            return decoding.greedy_decode(self.model, ids, capacity=self.capacity)
        return decoding.beam_search_decode(self.model, ids, beam_size=self.beam_size,
                                           length_alpha=self.length_alpha, capacity=self.capacity)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="source")])
    def translate(self, source):
        """`(batch,)` tf.string in; `{"translation": (batch,) tf.string}` out."""
        def run():
            ids = source_ids(source, self.model.max_length)
            return byte_codec.decode(self._decode_ids(ids))

        translation = tf.cond(tf.size(source) > 0, run, lambda: tf.zeros([0], tf.string))
        return {"translation": translation}


def next_version(export_dir):
    """One more than the largest integer version directory in `export_dir` (1 if none)."""
    versions = [int(name) for name in (os.listdir(export_dir) if os.path.isdir(export_dir) else [])
                if name.isdigit()]
    return max(versions, default=0) + 1


def export_saved_model(model, export_dir, beam_size=1, length_alpha=0.6, jit_compile=False,
                       version=None):
    """Exports `model` as a translating SavedModel under `export_dir/<version>/`.

    Returns:
        The version directory's path.
    """
    version = next_version(export_dir) if version is None else int(version)
    final = os.path.join(export_dir, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final} already exists; export to a new version.")
    staging = os.path.join(export_dir, f".tmp-{version}")
    shutil.rmtree(staging, ignore_errors=True)
    translator = Translator(float32_copy(model), beam_size, length_alpha, jit_compile)
    tf.saved_model.save(translator, staging,
                        signatures={"serving_default": translator.translate})
    extra = os.path.join(staging, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, "bytenet_config.json"), "w") as f:
        json.dump({"model": model.get_config(), "beam_size": beam_size,
                   "length_alpha": length_alpha, "jit_compile": jit_compile}, f, indent=2,
                  default=str)
    os.replace(staging, final)
    return final


def resolve_saved_model(path):
    """A version directory, or the newest integer version under an export base."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    if os.path.isdir(path):
        versions = [int(n) for n in os.listdir(path)
                    if n.isdigit() and os.path.isfile(os.path.join(path, n, "saved_model.pb"))]
        if versions:
            return os.path.join(path, str(max(versions)))
    raise FileNotFoundError(f"No SavedModel at {path}: expected {path}/saved_model.pb or "
                            f"{path}/<version>/saved_model.pb. Export one with bytenet-train "
                            "(--export_dir).")
