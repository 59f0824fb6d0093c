"""`TrainConfig`: every option of a training run, with its help text, and the dataset presets.

This is the one source of configuration: bytenet-train generates its flags from these fields
(and `pipelines.datasets.DataSpec`'s), with their names, types, choices, help and defaults.

A field left as None takes the dataset's preset (`PRESETS`), then the global default
(`DEFAULTS`), then, for the model's hyperparameters (sizes, dropout, max length, ...), the zoo
model's own value. `resolve` returns the effective configuration, which the trainer writes to
`model_dir/config.json` before it trains. Errors name the Python argument (`batch_size`);
the binary turns those names into flags.
"""

import dataclasses
import os

from bytenet_tf import ops, zoo
from bytenet_tf.training import devices
from pipelines.datasets import DataSpec, option

DEFAULTS = dict(batch_size=32, tokens_per_batch=0, train_steps=20000, learning_rate=3e-4,
                warmup_steps=1000, checkpoint_every=1000, eval_every=5000, valid_size=200,
                log_every=50)

# Data, not code: per-dataset values for fields left unset.
PRESETS = {
    # The no-flag main job: a small SELU ByteNet that learns the default digits task in a few
    # minutes on a 2-core CPU (see README for the measured run).
    "digits": dict(hidden_size=128, num_stacks=1, batch_size=64, train_steps=4000,
                   learning_rate=3e-3, warmup_steps=100, max_length=64, checkpoint_every=300,
                   eval_every=0, valid_size=1000, log_every=50),
}

# Fields that override the zoo model's hyperparameters when set.
MODEL_OVERRIDES = ("hidden_size", "num_stacks", "dropout_rate", "normalization", "branch_weight",
                   "residual_gate", "max_length")


@dataclasses.dataclass
class TrainConfig:
    """Options of `bytenet_tf.training.trainer.train_and_evaluate` (the flags of bytenet-train)."""
    model: str = option("bytenet_selu", "Zoo model to train.", choices=tuple(zoo.list_models()))
    data: DataSpec = dataclasses.field(default_factory=DataSpec)
    model_dir: str = option(None, "Checkpoints, TensorBoard logs, config.json, metrics.jsonl "
                            "and results.json. Default: runs/<model>_<dataset>.")
    export_dir: str = option(None, "SavedModel export base. Default: saved_models/<model>_<dataset>.")
    hidden_size: int = option(None, "Override the model's hidden size.")
    num_stacks: int = option(None, "Override the model's number of dilation stacks.")
    dropout_rate: float = option(None, "Override the model's dropout rate.")
    normalization: str = option(None, "Override the model's normalization layers (batch: "
                                "encoder only, layer in the decoder).",
                                choices=("layer", "batch", "none"))
    branch_weight: float = option(
        None, "Override the weight w of the residual branch: blocks return x + w*f(x), or "
        "(x + w*f(x))/sqrt(1 + w^2) in bytenet_selu, whose default is 1/sqrt(blocks per side), "
        "0.258 at 3 stacks (see docs/results.md, experiments 6 and 7).")
    residual_gate: bool = option(None, "Override: make the residual branch weight a learnable "
                                 "scalar that starts at 0 (SkipInit/ReZero).")
    max_length: int = option(None, "Longest sequence in bytes, EOS included; longer pairs are "
                             "dropped and counted. Default: the model's (500).")
    batch_size: int = option(None, "Global batch size in sentence pairs.")
    tokens_per_batch: int = option(None, "Global token budget per batch; 0 uses batch_size.")
    bucketing: bool = option(True, "Batch pairs of similar length together (less padding).")
    unicode_normalization: str = option(
        None, "Unicode-normalize training text (tensorflow-text); invalid UTF-8 passes unchanged.",
        choices=("NFC", "NFKC", "NFD", "NFKD"))
    shuffle_buffer: int = option(10000, "Pairs in the shuffle buffer; 0 for no shuffle.")
    train_steps: int = option(None, "Total training steps.")
    time_budget_seconds: float = option(
        0.0, "Stop (and checkpoint) after this much training time in this run, even before "
        "train_steps; 0 for no limit. A rerun continues.")
    learning_rate: float = option(None, "Peak learning rate (Adam, warm-up then rsqrt decay).")
    warmup_steps: int = option(None, "Linear warm-up steps.")
    decay_learning_rate: bool = option(True, "Decay as 1/sqrt(step) after the warm-up; false "
                                       "keeps the rate constant.")
    clip_norm: float = option(0.0, "Clip each replica's gradient to this norm; 0 for none.")
    adam_beta_2: float = option(0.999, "Adam's beta_2 (the SNN paper used 0.99 for SELU nets).")
    adam_epsilon: float = option(1e-7, "Adam's epsilon (the SNN paper used 0.01 for SELU nets).")
    precision: str = option("auto", "Precision policy.", choices=devices.PRECISIONS)
    strategy: str = option("auto", "tf.distribute strategy.", choices=devices.STRATEGIES)
    ops_policy: str = option("auto", "How the numerical kernels run (bytenet_tf.ops): auto picks "
                             "cpu_fused on a CPU, reference on a GPU or TPU.",
                             choices=(ops.AUTO,) + ops.POLICIES)
    seed: int = option(0, "Seeds the model, dropout and the data shuffle.")
    checkpoint_every: int = option(None, "Steps between checkpoints.")
    eval_every: int = option(None, "Steps between validations; 0 for the end only.")
    valid_size: int = option(None, "Validation sentences for BLEU/chrF.")
    log_every: int = option(None, "Steps between TensorBoard summaries.")
    beam_size: int = option(1, "Beam size of the exported model; 1 for greedy.")
    export: bool = option(True, "Export a SavedModel at the end.")
    progress: bool = option(True, "Show progress bars.")
    jit_compile_decode: bool = option(False, "Compile the exported decoding loop with XLA.")


def _check_at_least(config, name, minimum):
    value = getattr(config, name)
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}. Received: {name}={value}")


def resolve(config):
    """Returns a copy of `config` with every None filled from the presets, defaults and zoo.

    Raises:
        ValueError: a value is out of range; the message names the argument.
    """
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    preset = PRESETS.get(config.data.dataset, {})
    model_defaults = zoo.model_config(config.model)
    for key, value in values.items():
        if value is None:
            values[key] = preset.get(key, DEFAULTS.get(key, model_defaults.get(key)))
    run_name = f"{config.model}_{config.data.dataset}"
    values["model_dir"] = values["model_dir"] or os.path.join("runs", run_name)
    values["export_dir"] = values["export_dir"] or os.path.join("saved_models", run_name)
    resolved = TrainConfig(**values)
    for key in ("batch_size", "train_steps", "max_length", "checkpoint_every", "log_every",
                "beam_size"):
        _check_at_least(resolved, key, 1)
    for key in ("tokens_per_batch", "warmup_steps", "shuffle_buffer", "eval_every", "valid_size"):
        _check_at_least(resolved, key, 0)
    if resolved.learning_rate <= 0:
        raise ValueError(f"`learning_rate` must be > 0. Received: "
                         f"learning_rate={resolved.learning_rate}")
    return resolved


def model_overrides(config):
    """The zoo overrides that a resolved `config` sets, and the seed."""
    overrides = {key: getattr(config, key) for key in MODEL_OVERRIDES
                 if getattr(config, key) is not None}
    overrides["seed"] = config.seed
    return overrides
