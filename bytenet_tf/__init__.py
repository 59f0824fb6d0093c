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
(`TF_ENABLE_ONEDNN_OPTS=1`) unless that variable is set.
"""

import importlib
import os

# TensorFlow turns its oneDNN CPU kernels on by itself only on CPUs with AVX512 or newer
# extensions. On an AVX2-only CPU (an AMD EPYC Zen 3) they ran the text preset's float32
# training step 1.03-1.11x as fast as TensorFlow's Eigen kernels, and its large matmuls at up
# to 179 against 157 GFLOP/s (docs/cpu_fast_path.md). TensorFlow reads the variable when it
# loads, so this counts only when bytenet_tf is imported first (as its binaries do), and a
# value the user set always stands: TF_ENABLE_ONEDNN_OPTS=0 turns them off.
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
