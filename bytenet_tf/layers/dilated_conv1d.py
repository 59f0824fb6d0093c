"""`DilatedConv1D`: a dilated 1-D convolution that is either centred or causal."""

import keras
from keras import ops as kops

from bytenet_tf import ops


@keras.saving.register_keras_serializable(package="bytenet_tf")
class DilatedConv1D(keras.layers.Layer):
    """Dilated 1-D convolution over time, centred (encoder) or causal (decoder).

    A width-1 convolution is a dense product over channels (`ops.dense`); a wider one a dilated
    convolution (`ops.dilated_conv`), computed by the ops policy `ops_policy`. A causal
    convolution pads `(kernel_size - 1) * dilation_rate` zeros on the left, so output `t` reads inputs
    `t - (kernel_size - 1) * dilation_rate, ..., t` only. A centred one pads half of that on each
    side and needs an odd `kernel_size`.

    A causal convolution also decodes one position at a time in the style of Fast WaveNet: `step`
    takes the newest input and a queue of the `(kernel_size - 1) * dilation_rate` inputs before it,
    and returns the output for that position and the updated queue.

    Args:
        filters: int, number of output channels.
        kernel_size: int, taps of the kernel.
        dilation_rate: int, spacing between taps.
        causal: bool, whether output `t` may only see inputs up to `t`.
        kernel_initializer: initializer for the kernel of shape
            `(kernel_size, input_dim, filters)`; its fan-in is `kernel_size * input_dim`.
        use_bias: bool.
        ops_policy: str, how the products are computed (see `bytenet_tf.ops`).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor of shape `(batch_size, sequence_length, input_dim)`.

    Returns:
        Tensor of shape `(batch_size, sequence_length, filters)`.

    Example:
    >>> conv = DilatedConv1D(8, kernel_size=3, dilation_rate=4, causal=True)
    >>> conv(tf.zeros([2, 10, 5])).shape
    TensorShape([2, 10, 8])
    """

    def __init__(self, filters, kernel_size=3, dilation_rate=1, causal=False,
                 kernel_initializer="glorot_uniform", use_bias=True, ops_policy="reference",
                 **kwargs):
        super().__init__(**kwargs)
        for arg, value in (("filters", filters), ("kernel_size", kernel_size),
                           ("dilation_rate", dilation_rate)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{arg}` must be a positive int. Received: {arg}={value!r}")
        if not causal and kernel_size % 2 == 0:
            raise ValueError("A centred convolution needs an odd `kernel_size` to be symmetric. "
                             f"Received: kernel_size={kernel_size}")
        self.filters = filters
        self.kernel_size = kernel_size
        self.dilation_rate = dilation_rate
        self.causal = causal
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.use_bias = use_bias
        self.ops_policy = ops_policy
        self.ops = ops.get(ops_policy)

    @property
    def receptive_field(self):
        """Number of input positions that one output position reads."""
        return (self.kernel_size - 1) * self.dilation_rate + 1

    @property
    def queue_length(self):
        """Past inputs that `step` keeps: `(kernel_size - 1) * dilation_rate`."""
        return (self.kernel_size - 1) * self.dilation_rate

    def build(self, input_shape):
        input_dim = input_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(self.kernel_size, input_dim, self.filters),
            initializer=self.kernel_initializer)
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")
        self.input_dim = input_dim

    @property
    def matrix(self):
        """The kernel as a `(kernel_size * input_dim, filters)` matrix, taps outermost."""
        return kops.reshape(self.kernel, (self.kernel_size * self.input_dim, self.filters))

    @property
    def bias_or_none(self):
        return self.bias if self.use_bias else None

    def project_position(self, inputs):
        """Applies a width-1 convolution to one position: `(batch_size, input_dim)` in."""
        if self.kernel_size != 1:
            raise ValueError(f"Layer {self.name!r} has kernel_size={self.kernel_size}; use `step`.")
        return self.ops.dense(inputs, self.matrix, self.bias_or_none)

    def call(self, inputs):
        inputs = kops.convert_to_tensor(inputs)
        if self.kernel_size == 1:
            return self.ops.dense(inputs, self.matrix, self.bias_or_none)
        if self.causal:
            left, right = self.queue_length, 0
        else:
            left = right = self.queue_length // 2
        return self.ops.dilated_conv(inputs, self.kernel, self.dilation_rate, left, right,
                                     self.bias_or_none)

    def initial_queue(self, batch_size, dtype=None):
        """Zero queue for `step`: shape `(batch_size, queue_length, input_dim)`."""
        return kops.zeros((batch_size, self.queue_length, self.input_dim),
                          dtype=dtype or self.compute_dtype)

    def step(self, inputs, queue, position=None):
        """Computes one causal output position.

        Args:
            inputs: tensor of shape `(batch_size, input_dim)`, the input at position `t`.
            queue: tensor of shape `(batch_size, queue_length, input_dim)` from `initial_queue`
                or the last step: the inputs before `t` (zeros before the start).
                Or a history object of cached decoding (`bytenet_tf.decoding`) with
                `read(lags)`, the inputs `lag` steps back as a list of `(batch_size, input_dim)`,
                and `write(inputs)`, the history for `t+1`.
            position: int32 scalar `t`, or None. With `t` the queue is a ring buffer, the input
                of position `s` in slot `s mod queue_length`: a step reads its taps and writes
                one slot. Without, the queue holds inputs `t - queue_length .. t - 1` in order
                and every step shifts it by a copy. Step one queue in one way throughout.
                A history object keeps its own position.

        Returns:
            `(outputs, new_queue)`: outputs of shape `(batch_size, filters)`, and the queue for `t+1`.
        """
        if not self.causal:
            raise ValueError(f"Layer {self.name!r} is centred; only a causal convolution can step.")
        if hasattr(queue, "read"):
            # Taps t - (k-1)d, ..., t - d, then t: the kernel's taps, outermost in `matrix`.
            lags = [self.dilation_rate * k for k in range(self.kernel_size - 1, 0, -1)]
            taps = kops.concatenate(queue.read(lags) + [inputs], axis=-1)
            return self.ops.dense(taps, self.matrix, self.bias_or_none), queue.write(inputs)
        current = kops.expand_dims(inputs, 1)
        if position is None:
            window = kops.concatenate([queue, current], axis=1)
            taps, queue = window[:, ::self.dilation_rate], window[:, 1:]
        else:
            # Taps t - (k-1)d, ..., t - d from their slots, then t; t's slot held t - (k-1)d.
            back = self.dilation_rate * kops.arange(self.kernel_size - 1, 0, -1, dtype="int32")
            slots = kops.mod(kops.cast(position, "int32") - back, self.queue_length)
            taps = kops.concatenate([kops.take(queue, slots, axis=1), current], axis=1)
            slot = kops.mod(kops.cast(position, "int32"), self.queue_length)
            queue = kops.slice_update(queue, (0, slot, 0), current)
        taps = kops.reshape(taps, (-1, self.kernel_size * self.input_dim))
        return self.ops.dense(taps, self.matrix, self.bias_or_none), queue

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "dilation_rate": self.dilation_rate,
            "causal": self.causal,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "use_bias": self.use_bias,
        })
        return config
