"""Analytic FLOP counts of a `ByteNet`, for throughput figures.

Only matrix products are counted (2 FLOPs per multiply-add): the convolutions, the decoder's
input projection and the output projection. A training step costs three forward passes (the
forward pass, and the two products per layer of the backward pass).
"""


def _block_macs(block_type, width, kernel_size):
    if block_type == "simplified":
        return kernel_size * width * width
    half = width // 2
    return width * half + kernel_size * half * half + half * width


def forward_flops(model, source_length, target_length, batch_size):
    """FLOPs of one forward pass over `batch_size` pairs of the given lengths."""
    blocks = len(model.encoder_blocks)
    h, width = model.hidden_size, model.decoder_width
    vocab = model.output_projection.filters
    projection = 0 if model.decoder_input_projection is None else 2 * h * h
    encoder = source_length * blocks * _block_macs(model.block, h, model.encoder_kernel_size)
    decoder = target_length * (projection + blocks * _block_macs(model.block, width,
                                                                  model.kernel_size)
                               + width * vocab)
    return 2 * batch_size * (encoder + decoder)


def training_flops(model, source_length, target_length, batch_size):
    """FLOPs of one training step (forward and backward)."""
    return 3 * forward_flops(model, source_length, target_length, batch_size)
