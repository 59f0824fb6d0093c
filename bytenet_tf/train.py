"""bytenet-train: train, validate and export a ByteNet translator.

    bytenet-train                                  # bytenet_selu on the digits task
    bytenet-train --dataset=text --source_file=train.de --target_file=train.en \\
        --valid_source_file=dev.de --valid_target_file=dev.en --model=bytenet_small

The binary parses flags and calls `bytenet_tf.training.trainer.train_and_evaluate`. Its flags
are generated from the fields of `TrainConfig` and `DataSpec` (names, types, choices, help and
defaults are written there once). Flags left unset take the dataset's preset, then the defaults
(see `bytenet_tf.training.config`). Rerunning with the same --model_dir resumes from its last
checkpoint.
"""

import dataclasses
import json
import sys

from absl import app, flags, logging

from bytenet_tf import cli
from bytenet_tf.training.config import DEFAULTS, PRESETS, SHORT_BUDGET, TrainConfig
from pipelines.datasets import DataSpec

FLAGS = flags.FLAGS


def _fields():
    """The flag-bearing fields: DataSpec's, then TrainConfig's except `data` and those marked
    `flag=False`."""
    return (list(dataclasses.fields(DataSpec))
            + [field for field in dataclasses.fields(TrainConfig)
               if field.name != "data" and field.metadata.get("flag", True)])


def _preset_values(name):
    """What each preset sets field `name` to, e.g. "text preset: 0.1, 0.03 with a time budget
    under 5400 s"."""
    for dataset, preset in PRESETS.items():
        bound, short = SHORT_BUDGET.get(dataset, (0.0, {}))
        values = []
        if name in preset:
            values.append(f"{preset[name]}")
        elif name in short:
            values.append(f"{DEFAULTS[name]}" if name in DEFAULTS else "the model's")
        if name in short:
            values.append(f"{short[name]} with a time budget under {bound:g} s")
        if values:
            yield f"{dataset} preset: " + ", ".join(values)


def _help(field):
    """The field's help, with the global default and the presets' values of a field left None
    (a field without a global default, such as the model's width, shows the presets' alone)."""
    text = field.metadata["help"]
    if field.default is not None:
        return text
    presets = "; ".join(_preset_values(field.name))
    if field.name in DEFAULTS:
        text += f" Default: {DEFAULTS[field.name]}" + (f" ({presets})." if presets else ".")
    elif presets:
        text += f" Set by presets ({presets})."
    return text


def define_flags():
    """Defines one absl flag per configuration field, once per process."""
    cli.define_flags(_fields(), __name__, _help)


def config_from_flags():
    """The `TrainConfig` that the parsed flags describe."""
    values = {field.name: FLAGS[field.name].value for field in _fields()}
    data = DataSpec(**{f.name: values.pop(f.name) for f in dataclasses.fields(DataSpec)})
    return TrainConfig(data=data, **values)


def flag_message(message):
    """A library error in flag terms: `batch_size` and batch_size=0 become --batch_size(=0)."""
    return cli.flag_message(message, {field.name for field in _fields()})


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    from bytenet_tf.training import trainer

    try:
        results = trainer.train_and_evaluate(config_from_flags())
    except trainer.TrainingDivergedError as error:
        logging.error("%s", error)
        print(f"bytenet-train: error: {flag_message(str(error))}", file=sys.stderr)
        sys.exit(1)
    valid = results["valid"] or {}
    if valid:
        print(f"Held-out exact match: {valid['exact_match']:.4f} "
              f"({valid['sentences']} sentences); BLEU {valid['bleu']:.2f}"
              f"{valid.get('bleu_caveat', '')}; chrF {valid['chrf']:.2f}")
    for row in results.get("exact_match_by_length") or []:
        print(f"  {row['digits']} digit(s): exact match {row['exact_match']:.4f} on "
              f"{row['numbers']} numbers drawn independently ({row['seen_in_training']} of them "
              "seen in training)")
    if results["export_path"]:
        print(f"SavedModel: {results['export_path']}")
    print(json.dumps(results))


define_flags()


def run():
    """Console-script entry point."""
    logging.set_verbosity(logging.INFO)
    cli.run(main, __name__, "bytenet-train")


if __name__ == "__main__":
    run()
