"""Analytic FLOP counts of a `ByteNet`, for throughput figures.

Only matrix products are counted (2 FLOPs per multiply-add): the convolutions, the decoder's
input projection and the output projection. A training step costs three forward passes (the
forward pass, and the two products per layer of the backward pass).
"""


def _block_macs(model):
    h, k = model.hidden_size, model.kernel_size
    if model.block == "simplified":
        return k * h * h
    half = h // 2
    return h * half + k * half * half + half * h


def forward_flops(model, source_length, target_length, batch_size):
    """FLOPs of one forward pass over `batch_size` pairs of the given lengths."""
    blocks = len(model.encoder_blocks)
    h = model.hidden_size
    vocab = model.output_projection.filters
    encoder = source_length * blocks * _block_macs(model)
    decoder = target_length * (2 * h * h + blocks * _block_macs(model) + h * vocab)
    return 2 * batch_size * (encoder + decoder)


def training_flops(model, source_length, target_length, batch_size):
    """FLOPs of one training step (forward and backward)."""
    return 3 * forward_flops(model, source_length, target_length, batch_size)
