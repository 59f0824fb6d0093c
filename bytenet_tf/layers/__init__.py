"""ByteNet layers, registered for Keras serialization under the package name `bytenet_tf`."""

from bytenet_tf.layers.alpha_dropout import AlphaDropout
from bytenet_tf.layers.cross_attention import CrossAttention
from bytenet_tf.layers.dilated_conv1d import DilatedConv1D
from bytenet_tf.layers.residual_block import ResidualBlock
from bytenet_tf.layers.simplified_residual_block import SimplifiedResidualBlock

__all__ = ["AlphaDropout", "CrossAttention", "DilatedConv1D", "ResidualBlock", "SimplifiedResidualBlock"]
