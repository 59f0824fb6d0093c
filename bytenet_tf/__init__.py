"""bytenet_tf: a Keras 3 / TensorFlow model zoo for byte-level translation with ByteNet.

    import bytenet_tf
    bytenet_tf.list_models()      # ['bytenet', 'bytenet_nonorm', 'bytenet_selu', ...]
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=128)
    bytenet_tf.inference.Translator(model)([b"Guten Tag"])   # -> [b"..."]

`bytenet_tf.vocabulary` holds the byte ids, `bytenet_tf.ops` the numerical kernels and their
policies, `bytenet_tf.inference` translation.
"""

from bytenet_tf import inference, ops, vocabulary
from bytenet_tf.zoo import build_model, list_models

__all__ = ["build_model", "inference", "list_models", "ops", "vocabulary"]
__version__ = "0.1.0"
