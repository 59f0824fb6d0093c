"""bytenet_tf: a Keras 3 / TensorFlow model zoo for byte-level translation with ByteNet.

    import bytenet_tf
    bytenet_tf.list_models()      # ['bytenet', 'bytenet_nonorm', 'bytenet_selu', ...]
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=128)
"""

from bytenet_tf.zoo import build_model, list_models

__all__ = ["build_model", "list_models"]
__version__ = "0.1.0"
