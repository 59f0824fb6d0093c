"""The model zoo: one explicit dict from a model name to its hyperparameters.

`build_model(name, **overrides)` returns a `ByteNet` (a `keras.Model`); `list_models()` the names.
The paper and thesis hyperparameters are written here once, with their sources.
"""

import inspect

from bytenet_tf.models.bytenet import ByteNet
from bytenet_tf.vocabulary import DEFAULT_MAX_LENGTH

# Kalchbrenner et al. 2016 ("Neural Machine Translation in Linear Time", section 6): 30
# residual blocks in the encoder and 30 in the decoder, dilations 1, 2, 4, 8, 16 repeated 6
# times, 800 hidden units, kernel width 3, layer normalization, ReLU, and dynamic unfolding with
# a = 1.2, b = 0. The paper's "d" is ambiguous between the stream and the bottleneck; here
# `hidden_size` is the residual stream and the bottleneck is hidden_size // 2.
_PAPER = dict(hidden_size=800, num_stacks=6, dilations=(1, 2, 4, 8, 16), kernel_size=3,
              block="residual", normalization="layer", activation="relu", dropout_rate=0.0,
              kernel_initializer="glorot_uniform", unfold_a=1.2, unfold_b=0.0,
              max_length=DEFAULT_MAX_LENGTH)

# The thesis (TensorFlow 1, 2017) trained ByteNet at hidden 400 with 3 stacks (15 blocks per side)
# and a maximum sentence length of 500 bytes (DEFAULT_MAX_LENGTH).
_THESIS = dict(_PAPER, hidden_size=400, num_stacks=3)

# The thesis's own code (AndreasMadsen/master-thesis, `code/model/bytenet.py`, versions `v1` and
# `v1-selu`), as far as this model class can express it: encoder kernel 5, decoder kernel 3, the
# decoder at 2 * hidden on [encoder output, target embedding] with no projection, no encoder
# output norm and no head before the logits (layout="thesis"), a plain residual sum, no dropout,
# and sugartensor's he_uniform for every kernel and both embeddings. Left as they are: its norms
# had no scale (gamma), and its embeddings kept a zero row for padding.
_THESIS_CODE = dict(_THESIS, encoder_kernel_size=5, kernel_size=3, layout="thesis",
                    normalize_residual=False, branch_weight=1.0, dropout_rate=0.0,
                    kernel_initializer="sugartensor_he_uniform",
                    embedding_initializer="sugartensor_he_uniform")

_SELU = dict(_THESIS, normalization="none", activation="selu", kernel_initializer="lecun_uniform",
             dropout_rate=0.05, normalize_residual=True, branch_weight="inv_sqrt_depth")

MODELS = {
    "bytenet": _PAPER,
    "bytenet_small": _THESIS,
    # The thesis's simplified ByteNet: each block is norm, act, dilated conv, add.
    "bytenet_simplified": dict(_THESIS, block="simplified"),
    # The baseline that fails to memorize newstest in the thesis.
    "bytenet_nonorm": dict(_THESIS, normalization="none"),
    # SELU ByteNet (Klambauer et al. 2017): no normalization, selu, LeCun-uniform init and
    # AlphaDropout; the residual sum is rescaled to keep unit variance through depth (see
    # `ResidualBlock`), with the branch weighted by w = 1/sqrt(blocks per side) (0.258 at 15):
    # blocks return (x + w f(x)) / sqrt(1 + w^2). With w = 1 the identity path through the 15
    # decoder blocks keeps 2**-7.5 of the embedding; with 1/sqrt(15) it keeps
    # (1 + 1/15)**-7.5 = 0.62, and the branches together add about one branch's variance,
    # whatever the depth (the thesis's small sugartensor kernels had the same effect). The
    # sweeps behind this choice, on memorization and on real text, are in docs/results.md,
    # "The residual branch".
    "bytenet_selu": _SELU,
    # SELU ByteNet with one cross-attention readout of the encoder output after the decoder's
    # first stack (`CrossAttention`), as one more residual branch with position encodings in its
    # queries and keys: each target position may read any source position, where ByteNet alone
    # reads the encoder at its own position. Of the readouts screened, the one that trained
    # best; none yet trains as well as `bytenet_selu` (docs/results.md, "Real translation").
    "bytenet_selu_attention": dict(_SELU, cross_attention="branch_positions"),
    # The thesis's `v1`: batch norm in the encoder, layer norm in the decoder, ReLU.
    "bytenet_thesis": dict(_THESIS_CODE, normalization="batch", decoder_normalization="layer"),
    # The thesis's `v1-selu`: no normalization, selu.
    "bytenet_selu_thesis": dict(_THESIS_CODE, normalization="none", activation="selu"),
}

_OVERRIDABLE = tuple(name for name in inspect.signature(ByteNet.__init__).parameters
                     if name not in ("self", "kwargs")) + ("dtype", "name")


def list_models():
    """Returns the zoo's model names, sorted."""
    return sorted(MODELS)


def model_config(name, **overrides):
    """Returns the constructor arguments of zoo model `name` with `overrides` applied."""
    if name not in MODELS:
        raise ValueError(f"Model {name!r} is unknown; choose one of: {', '.join(list_models())}")
    unknown = sorted(set(overrides) - set(_OVERRIDABLE))
    if unknown:
        raise ValueError(f"Unknown override(s) {', '.join(unknown)} for model {name!r}; "
                         f"valid overrides: {', '.join(sorted(_OVERRIDABLE))}")
    config = dict(MODELS[name])
    config.update(overrides)
    config.setdefault("name", name)
    return config


def build_model(name, **overrides):
    """Builds zoo model `name` with `overrides`, e.g. `build_model("bytenet_selu", hidden_size=64)`.

    Pass `dtype="mixed_bfloat16"` (or any Keras dtype policy) for mixed precision; the logits
    stay float32. The returned model is built (its weights exist).

    Returns:
        A `keras.Model` that maps `{"source": (batch, S), "target": (batch, T)}` int32 ids to
        float32 logits `(batch, T, VOCAB_SIZE)`.
    """
    model = ByteNet(**model_config(name, **overrides))
    model.build()
    return model
