"""`SimplifiedResidualBlock`: the thesis's ByteNet block without 1x1 convolutions."""

import keras

from bytenet_tf.layers.residual_block import ResidualBlock


@keras.saving.register_keras_serializable(package="bytenet_tf")
class SimplifiedResidualBlock(ResidualBlock):
    """Simplified ByteNet block: norm, act, dilated conv of width `kernel_size`, add.

    The convolution keeps `hidden_size` channels. Arguments, call arguments, residual scaling
    and `step` are those of `ResidualBlock`.

    Example:
    >>> block = SimplifiedResidualBlock(16, dilation_rate=4, causal=True)
    >>> block(tf.zeros([2, 7, 16])).shape
    TensorShape([2, 7, 16])
    """

    def _build_convs(self):
        return [self._conv(self.hidden_size, self.kernel_size, self.dilation_rate, "conv_dilated")]
