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
"""

import importlib

from bytenet_tf import ops, vocabulary
from bytenet_tf.zoo import build_model, list_models


def __getattr__(name):
    # `bytenet_tf.inference` (TensorFlow) is imported on first use.
    if name == "inference":
        return importlib.import_module("bytenet_tf.inference")
    raise AttributeError(f"module 'bytenet_tf' has no attribute {name!r}")


__all__ = ["build_model", "inference", "list_models", "ops", "vocabulary"]
__version__ = "0.1.0"
