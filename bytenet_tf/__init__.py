"""bytenet_tf: a Keras 3 / TensorFlow model zoo for byte-level translation with ByteNet.

    import bytenet_tf
    bytenet_tf.list_models()      # ['bytenet', 'bytenet_nonorm', 'bytenet_selu', ...]
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=128)
    bytenet_tf.inference.Translator(model)([b"Guten Tag"])   # -> [b"..."]

`bytenet_tf.vocabulary` holds the byte ids, `bytenet_tf.ops` the numerical kernels and their
policies, `bytenet_tf.inference` translation.

The models are written in `keras.ops` and need no TensorFlow: under `KERAS_BACKEND=jax` or
`torch`, `import bytenet_tf`, the zoo, the layers and the ids import none. Translation,
export, the binaries and the pipelines are TensorFlow's, and import it when they are used.

Imported before TensorFlow, `bytenet_tf` turns on TensorFlow's oneDNN CPU kernels
(`TF_ENABLE_ONEDNN_OPTS=1`) unless that variable is set or the process is bytenet-translate or
bytenet-evaluate, which decode faster with TensorFlow's own choice.
"""

import importlib
import os
import sys

# The binaries that only decode. On an AVX2-only CPU (an AMD EPYC Zen 3) oneDNN's kernels
# decoded a 30-minute export's news sentences at 0.89 and 0.94x the speed of TensorFlow's Eigen
# kernels, and its captions at 0.88 and 1.00x (docs/results/onednn_zen3.json), so these two keep
# TensorFlow's own choice.
DECODING_BINARIES = ("bytenet-translate", "bytenet-evaluate", "bytenet_tf.translate",
                     "bytenet_tf.evaluate")


def runs_a_decoding_binary(argv):
    """Whether the command line `argv` (`sys.orig_argv`) runs bytenet-translate or
    bytenet-evaluate, as a console script or with `python -m`."""
    for index, word in enumerate(argv[1:], 1):
        if word == "-m":
            return index + 1 < len(argv) and argv[index + 1] in DECODING_BINARIES
        if not word.startswith("-"):
            # The script: a console script's path, or a Python file.
            return os.path.basename(word) in DECODING_BINARIES
    return False


# TensorFlow turns its oneDNN CPU kernels on by itself only on CPUs with AVX512 or newer
# extensions. On an AVX2-only CPU (an AMD EPYC Zen 3) they ran the text preset's float32
# training step 1.03-1.11x as fast as TensorFlow's Eigen kernels, and its large matmuls at up
# to 179 against 157 GFLOP/s (docs/cpu_fast_path.md). TensorFlow reads the variable when it
# loads, so this counts only when bytenet_tf is imported first (as its binaries do), and a
# value the user set always stands: TF_ENABLE_ONEDNN_OPTS=0 turns them off.
if not runs_a_decoding_binary(getattr(sys, "orig_argv", sys.argv)):
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from bytenet_tf import ops, vocabulary  # noqa: E402
from bytenet_tf.zoo import build_model, list_models  # noqa: E402


def __getattr__(name):
    # `bytenet_tf.inference` (TensorFlow) is imported on first use.
    if name == "inference":
        return importlib.import_module("bytenet_tf.inference")
    raise AttributeError(f"module 'bytenet_tf' has no attribute {name!r}")


__all__ = ["build_model", "inference", "list_models", "ops", "vocabulary"]
__version__ = "0.1.0"
