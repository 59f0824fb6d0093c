"""bytenet-train: train, validate and export a ByteNet translator.

    bytenet-train                                  # bytenet_selu on the digits task
    bytenet-train --dataset=text --source_file=train.de --target_file=train.en \\
        --valid_source_file=dev.de --valid_target_file=dev.en --model=bytenet_small

The binary parses flags and calls `bytenet_tf.training.trainer.train_and_evaluate`. Flags left
unset take the dataset's preset, then the defaults (see `bytenet_tf.training.config`). Rerunning
with the same --model_dir resumes from its last checkpoint.
"""

import json
import sys

from absl import app, flags, logging

from bytenet_tf import zoo
from bytenet_tf.training import devices
from pipelines import datasets, digits

FLAGS = flags.FLAGS

flags.DEFINE_enum("model", "bytenet_selu", zoo.list_models(), "Zoo model to train.")
flags.DEFINE_enum("dataset", "digits", list(datasets.DATASETS), "Training data.")
flags.DEFINE_string("data_dir", None, "tfds data dir; sacrebleu cache for newstest; manual "
                    "directory with the Europarl v7 files for europarl.")
flags.DEFINE_string("source_file", None, "Training source file for --dataset=text.")
flags.DEFINE_string("target_file", None, "Training target file for --dataset=text.")
flags.DEFINE_string("valid_source_file", None, "Validation source file for --dataset=text.")
flags.DEFINE_string("valid_target_file", None, "Validation target file for --dataset=text.")
flags.DEFINE_string("source_lang", "de", "Source language.")
flags.DEFINE_string("target_lang", "en", "Target language.")
flags.DEFINE_integer("newstest_year", 2013, "Year of the WMT news test set (--dataset=newstest).")
flags.DEFINE_enum("digits_config", "default", list(digits.DIGITS_CONFIGS),
                  "Digits task configuration (--dataset=digits); see pipelines/digits.py.")
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs and config.json. "
                    "Default: runs/<model>_<dataset>.")
flags.DEFINE_string("export_dir", None, "SavedModel export base. Default: saved_models/<model>_<dataset>.")
flags.DEFINE_integer("batch_size", None, "Global batch size in sentence pairs.")
flags.DEFINE_integer("tokens_per_batch", None, "Global token budget per batch; 0 uses --batch_size.")
flags.DEFINE_bool("bucketing", True, "Batch pairs of similar length together (less padding).")
flags.DEFINE_enum("unicode_normalization", None, ["NFC", "NFKC", "NFD", "NFKD"],
                  "Unicode-normalize training text (tensorflow-text); invalid UTF-8 passes unchanged.")
flags.DEFINE_integer("shuffle_buffer", 10000, "Pairs in the shuffle buffer; 0 for no shuffle.")
flags.DEFINE_integer("train_steps", None, "Total training steps.")
flags.DEFINE_float("time_budget_seconds", 0.0, "Stop (and checkpoint) after this much training "
                   "time in this run, even before --train_steps; 0 for no limit. A rerun continues.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate (Adam, warm-up then rsqrt decay).")
flags.DEFINE_integer("warmup_steps", None, "Linear warm-up steps.")
flags.DEFINE_bool("decay_learning_rate", True, "Decay as 1/sqrt(step) after the warm-up; "
                  "--nodecay_learning_rate keeps it constant.")
flags.DEFINE_float("clip_norm", 0.0, "Clip each replica's gradient to this norm; 0 for none.")
flags.DEFINE_integer("max_length", None, "Longest sequence in bytes, EOS included (default 500).")
flags.DEFINE_integer("hidden_size", None, "Override the model's hidden size.")
flags.DEFINE_integer("num_stacks", None, "Override the model's number of dilation stacks.")
flags.DEFINE_float("dropout_rate", None, "Override the model's dropout rate.")
flags.DEFINE_float("branch_weight", None,
                   "Override the weight w of the residual branch: blocks return x + w*f(x), or "
                   "(x + w*f(x))/sqrt(1 + w^2) in bytenet_selu. A smaller w keeps more of the "
                   "identity path through depth (see docs/results.md, experiment 2).")
flags.DEFINE_enum("normalization", None, ["layer", "batch", "none"],
                  "Override the model's normalization (batch: encoder only, layer in the decoder).")
flags.DEFINE_enum("precision", "auto", list(devices.PRECISIONS), "Precision policy.")
flags.DEFINE_enum("strategy", "auto", list(devices.STRATEGIES), "tf.distribute strategy.")
flags.DEFINE_integer("seed", 0, "Seeds the model, dropout and the data shuffle.")
flags.DEFINE_integer("checkpoint_every", None, "Steps between checkpoints.")
flags.DEFINE_integer("eval_every", None, "Steps between validations; 0 for the end only.")
flags.DEFINE_integer("valid_size", None, "Validation sentences for BLEU/chrF.")
flags.DEFINE_integer("log_every", None, "Steps between TensorBoard summaries.")
flags.DEFINE_integer("beam_size", 1, "Beam size of the exported model; 1 for greedy.")
flags.DEFINE_bool("export", True, "Export a SavedModel at the end.")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.DEFINE_bool("jit_compile_decode", False, "Compile the exported decoding loop with XLA.")


def config_from_flags():
    """The `TrainConfig` that the flags describe."""
    from bytenet_tf.training.config import TrainConfig

    data = datasets.DataSpec(
        name=FLAGS.dataset, source_lang=FLAGS.source_lang, target_lang=FLAGS.target_lang,
        data_dir=FLAGS.data_dir, source_file=FLAGS.source_file, target_file=FLAGS.target_file,
        valid_source_file=FLAGS.valid_source_file, valid_target_file=FLAGS.valid_target_file,
        newstest_year=FLAGS.newstest_year, digits_config=FLAGS.digits_config)
    return TrainConfig(
        model=FLAGS.model, data=data, model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir,
        hidden_size=FLAGS.hidden_size, num_stacks=FLAGS.num_stacks, dropout_rate=FLAGS.dropout_rate,
        normalization=FLAGS.normalization, branch_weight=FLAGS.branch_weight,
        batch_size=FLAGS.batch_size, tokens_per_batch=FLAGS.tokens_per_batch,
        bucketing=FLAGS.bucketing, shuffle_buffer=FLAGS.shuffle_buffer,
        unicode_normalization=FLAGS.unicode_normalization,
        train_steps=FLAGS.train_steps, time_budget_seconds=FLAGS.time_budget_seconds,
        learning_rate=FLAGS.learning_rate,
        warmup_steps=FLAGS.warmup_steps, decay_learning_rate=FLAGS.decay_learning_rate,
        clip_norm=FLAGS.clip_norm, max_length=FLAGS.max_length,
        precision=FLAGS.precision, strategy=FLAGS.strategy, seed=FLAGS.seed,
        checkpoint_every=FLAGS.checkpoint_every, eval_every=FLAGS.eval_every,
        valid_size=FLAGS.valid_size, log_every=FLAGS.log_every, beam_size=FLAGS.beam_size,
        export=FLAGS.export, progress=FLAGS.progress, jit_compile=FLAGS.jit_compile_decode)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    from bytenet_tf.training import trainer

    try:
        results = trainer.train_and_evaluate(config_from_flags())
    except (trainer.TrainingDivergedError, ValueError, FileNotFoundError) as error:
        logging.error("%s", error)
        print(f"bytenet-train: error: {error}", file=sys.stderr)
        sys.exit(1)
    valid = results["valid"] or {}
    if valid:
        print(f"Held-out exact match: {valid['exact_match']:.4f} "
              f"({valid['sentences']} sentences); BLEU {valid['bleu']:.2f}"
              f"{valid.get('bleu_caveat', '')}; chrF {valid['chrf']:.2f}")
    if results["export_path"]:
        print(f"SavedModel: {results['export_path']}")
    print(json.dumps(results))


def run():
    """Console-script entry point."""
    logging.set_verbosity(logging.INFO)
    app.run(main)


if __name__ == "__main__":
    run()
