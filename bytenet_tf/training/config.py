"""`TrainConfig`: every option of a training run, and the per-dataset presets.

A field left as None takes the dataset's preset (`PRESETS`), then the global default
(`DEFAULTS`), then, for the model sizes, the zoo model's own value. `resolve` returns the
effective configuration, which the trainer writes to `model_dir/config.json` before it trains.
"""

import dataclasses
import os

from pipelines.datasets import DataSpec

DEFAULTS = dict(batch_size=32, tokens_per_batch=0, train_steps=20000, learning_rate=3e-4,
                warmup_steps=1000, max_length=500, checkpoint_every=1000, eval_every=5000,
                valid_size=200, log_every=50)

# The no-flag main job: a small SELU ByteNet that learns the default digits task to >= 95%
# exact match in a few minutes on a 2-core CPU (see README for the measured run).
PRESETS = {
    "digits": dict(hidden_size=128, num_stacks=1, batch_size=64, train_steps=1200,
                   learning_rate=3e-3, warmup_steps=100, max_length=64, checkpoint_every=300,
                   eval_every=0, valid_size=1000, log_every=50),
}


@dataclasses.dataclass
class TrainConfig:
    """Options of `bytenet_tf.training.trainer.train_and_evaluate` (the flags of bytenet-train)."""
    model: str = "bytenet_selu"
    data: DataSpec = dataclasses.field(default_factory=DataSpec)
    model_dir: str = None
    export_dir: str = None
    hidden_size: int = None
    num_stacks: int = None
    dropout_rate: float = None
    normalization: str = None
    branch_weight: float = None
    batch_size: int = None
    tokens_per_batch: int = None
    bucketing: bool = True
    unicode_normalization: str = None
    shuffle_buffer: int = 10000
    train_steps: int = None
    time_budget_seconds: float = 0.0
    learning_rate: float = None
    warmup_steps: int = None
    decay_learning_rate: bool = True
    clip_norm: float = 0.0
    max_length: int = None
    precision: str = "auto"
    strategy: str = "auto"
    seed: int = 0
    checkpoint_every: int = None
    eval_every: int = None
    valid_size: int = None
    log_every: int = None
    beam_size: int = 1
    export: bool = True
    progress: bool = True
    jit_compile: bool = False


def resolve(config):
    """Returns a copy of `config` with every None filled from the presets and defaults."""
    values = dataclasses.asdict(config)
    values["data"] = config.data
    preset = PRESETS.get(config.data.name, {})
    for key, value in values.items():
        if value is None and key in preset:
            values[key] = preset[key]
        elif value is None and key in DEFAULTS:
            values[key] = DEFAULTS[key]
    run_name = f"{config.model}_{config.data.name}"
    values["model_dir"] = values["model_dir"] or os.path.join("runs", run_name)
    values["export_dir"] = values["export_dir"] or os.path.join("saved_models", run_name)
    resolved = TrainConfig(**values)
    for key in ("batch_size", "train_steps", "max_length", "checkpoint_every", "log_every"):
        if getattr(resolved, key) < 1:
            raise ValueError(f"--{key} must be >= 1. Received: {getattr(resolved, key)}")
    if resolved.learning_rate <= 0:
        raise ValueError(f"--learning_rate must be > 0. Received: {resolved.learning_rate}")
    return resolved


def model_overrides(config):
    """The zoo overrides that `config` sets (None fields keep the zoo's values)."""
    overrides = {"max_length": config.max_length, "seed": config.seed}
    for key in ("hidden_size", "num_stacks", "dropout_rate", "normalization", "branch_weight"):
        if getattr(config, key) is not None:
            overrides[key] = getattr(config, key)
    return overrides
