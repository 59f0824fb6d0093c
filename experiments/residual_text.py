"""The residual branch on real text: SELU ByteNet's residual settings at equal steps, with seeds.

    python experiments/residual_text.py --steps=400 --seeds=0,1,2          # every setting
    python experiments/residual_text.py --steps=20 --settings=w1 --seeds=0 --name=smoke
    python experiments/residual_text.py --add_block_statistics=residual_text_1400steps
    python experiments/residual_text.py --merge=residual_text_2800steps_seed2 \
        --name=residual_text_2800steps

The settings are those of the memorization sweep (`experiments/residual_sweep.py`): `w<x>` the branch weight of
`(x + w f(x)) / sqrt(1 + w^2)`, `w_invsqrtL` 1/sqrt(15), `gate` a learnable weight from 0,
`+snn_adam` Adam with beta_2 0.99 and epsilon 0.01, `+constant` no decay after the warm-up,
`+lr<rate>` another peak learning rate, `+attention_identity` / `+attention_branch` /
`+attention_positions` a cross-attention readout (`bytenet_tf.layers.CrossAttention`) starting
as the identity, as a weighted residual branch, or as that branch with position encodings. Each run trains `--model` (default `bytenet_selu`; for
a model whose `normalize_residual` is off, such as the layer-norm `bytenet_small`, `w<x>` gives
the plain `x + w f(x)`, and `w1` is its zoo default) at its zoo size (hidden 400, 3 stacks,
the zoo's dropout) with bytenet-train's
`text` preset (batch 32, Adam 2e-3 after 200 warm-up steps, cosine to 5%, pairs up to 200
bytes, shuffle buffer 100,000) in float32 (`--precision`;
float32 so that a sweep continued on another CPU stays comparable: `auto` picks bfloat16 on
some CPUs and float32 on others, and the 400-step sweep ran float32) on
../shared/data/deen/train.* less the 500 held-out pairs of `experiments/translator.py`, for a
fixed number of steps (the cosine ends there; no time budget), so every setting sees the same
batches per seed. Then, on the held-out pairs, it scores the last weights:

- `heldout_nats`: teacher-forced cross-entropy per target byte (EOS included) on all 500 pairs,
  no dropout (`bytenet_tf.training.evaluation.cross_entropy`);
- `valid_bleu` / `valid_chrf`: greedy translations of the first 100 held-out pairs.

Seeds run round-robin (every setting at seed 0, then seed 1, ...), and the results file is
rewritten after each run, so a stopped sweep keeps whole seeds. Writes
docs/results/<name>.json (default `residual_text_<steps>steps`): per run the scores above, the
mean training loss of the last 10 logs, the largest global gradient norm, the logged curve
(loss, gradient norm, learning rate), and for `gate` the learned branch weight of every block.
`--add_block_statistics=NAME --runs=DIR` reads an earlier results file's runs back from their
checkpoints, without training, and adds the learned weights and every block's branch share:
the mean square of its weighted branch `w f(x)` over that of its input `x`, on
BRANCH_SHARE_PAIRS held-out pairs. A gate's w alone does not say how much a block adds, since
f's own scale is learned too; the share does.

`--merge=SOURCE --name=NAME` moves the runs of docs/results/SOURCE.json into NAME.json, so that
seeds run later, or on another machine, join their sweep's table. Both files must hold the
same sweep (model, steps, held-out split, weights, validation size) and no setting and seed
twice; NAME.json lists SOURCE's command and commit under `merged`, and SOURCE.json is then
removed.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from bytenet_tf import zoo  # noqa: E402
from bytenet_tf.training import checkpoints, devices, evaluation, trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig, model_overrides, resolve  # noqa: E402
from experiments.common import RESIDUAL_TEXT_MODEL as DEFAULT_MODEL  # noqa: E402
from experiments.common import (RESULTS, RUNS, cpu_name, mean_last_loss,  # noqa: E402
                                read_metrics, sweep_model, write_results)
from experiments.residual_sweep import WEIGHTS, setting_overrides  # noqa: E402
from experiments.translator import held_out_data  # noqa: E402
from pipelines import datasets  # noqa: E402

VALID_SENTENCES = 100
BRANCH_SHARE_PAIRS = 100  # held-out pairs for branch_shares
SETTINGS = ("w0.1", "w0.2", "w0.3", "w_invsqrtL", "w1", "gate", "w_invsqrtL+snn_adam",
            "w_invsqrtL+constant")


def new_model(config):
    """The run's model, freshly built (its weights drawn from the config's seed)."""
    config = resolve(config)
    return zoo.build_model(config.model, **model_overrides(config))


def last_model(config):
    """The run's model at its last checkpoint."""
    model = new_model(config)
    checkpoints.restore_model(model, tf.train.latest_checkpoint(config.model_dir))
    return model


def _per_side(model, value):
    """`{"encoder": [...], "decoder": [...]}`: `value(block)` for each block, in block order."""
    return {side: [value(block) for block in blocks]
            for side, blocks in (("encoder", model.encoder_blocks),
                                 ("decoder", model.decoder_blocks))}


def heldout_loss(config, model):
    """`evaluation.cross_entropy` of `model` on every validation pair of `config.data`."""
    sources, targets = datasets.take_pairs(config.data, "validation", -1)
    return evaluation.cross_entropy(model, sources, targets)


def learned_gates(model):
    """The learned branch weights of a `residual_gate` model, `{"encoder": [...], "decoder":
    [...]}` in block order, or None when the model has fixed weights."""
    if not model.residual_gate:
        return None
    return _per_side(model, lambda block: float(block.gate.numpy()))


def run_config(setting, seed, steps, data, precision, runs=RUNS, model=DEFAULT_MODEL):
    """The `TrainConfig` of one run; its model_dir is `runs/residual_text/<setting>_seed<seed>`,
    with `<model>_` before the setting for a model other than DEFAULT_MODEL."""
    prefix = "" if model == DEFAULT_MODEL else f"{model}_"
    return TrainConfig(
        model=model, data=data,
        model_dir=os.path.join(runs, "residual_text", f"{prefix}{setting}_seed{seed}"),
        export=False,
        train_steps=steps, time_budget_seconds=0, eval_every=0, valid_size=VALID_SENTENCES,
        select_by="last", average_last=0, beam_size=1, log_every=10, checkpoint_every=steps,
        progress=False, seed=seed, precision=precision, **setting_overrides(setting))


def branch_shares(model, sources, targets):
    """Per block, the mean square of the weighted branch `w f(x)` over the mean square of the
    block's input `x`, pooled over every position and unit of the given pairs (one pair per
    call, so no padding enters), without dropout: `{"encoder": [...], "decoder": [...]}` in
    block order. Pairs longer than the model's `max_length` are left out, as
    `evaluation.cross_entropy` leaves them out."""
    blocks = model.encoder_blocks + model.decoder_blocks
    sums = {id(block): [0.0, 0.0] for block in blocks}

    def recording(block):
        residual = block._residual

        def wrapped(inputs, branch, *rest):
            weight = block.gate if block.residual_gate else block.branch_weight
            sums[id(block)][0] += float(tf.reduce_sum(tf.square(tf.cast(weight * branch,
                                                                        tf.float32))))
            sums[id(block)][1] += float(tf.reduce_sum(tf.square(tf.cast(inputs, tf.float32))))
            return residual(inputs, branch, *rest)
        return wrapped

    for block in blocks:
        block._residual = recording(block)
    try:
        evaluation.cross_entropy(model, sources, targets, batch_size=1)
    finally:
        for block in blocks:
            del block._residual  # back to the class's method
    return _per_side(model, lambda block: sums[id(block)][0] / sums[id(block)][1])


def add_block_statistics(name, data, runs):
    """Fills `learned_gates` and `branch_shares` into docs/results/<name>.json from its runs'
    last checkpoints under `runs` (for results written before runs recorded them); keeps the
    file's commit."""
    with open(os.path.join(RESULTS, f"{name}.json")) as f:
        results = json.load(f)
    sources, targets = datasets.take_pairs(data, "validation", BRANCH_SHARE_PAIRS)
    for row in results["runs"]:
        config = run_config(row["setting"], row["seed"], row["steps"], data,
                            row.get("precision", "float32"), runs, sweep_model(results))
        model = last_model(config)
        row["learned_gates"] = learned_gates(model)
        row["branch_shares"] = branch_shares(model, sources, targets)
        row["branch_share_pairs"] = len(sources)
        print(f"{row['setting']} seed {row['seed']}: gates {row['learned_gates']}, "
              f"branch shares {row['branch_shares']}", flush=True)
    # The same statistic at initialization (seed 0), the reference point of the trained ones.
    results["initial_branch_shares"] = {}
    for setting in sorted({row["setting"] for row in results["runs"]}):
        keras.utils.set_random_seed(0)  # as the trainer seeds a run's initialization
        model = new_model(run_config(setting, 0, 1, data, "float32", runs,
                                     sweep_model(results)))
        results["initial_branch_shares"][setting] = branch_shares(model, sources, targets)
    results["block_statistics_command"] = (
        f"python experiments/residual_text.py --add_block_statistics={name}")
    write_results(name, results, commit_text=results["commit"])


# What two results files must share for their runs to be one sweep.
SWEEP_KEYS = ("model", "steps", "weights", "held_out_validation", "valid_sentences")


def merge_results(source, name):
    """Moves the runs of docs/results/<source>.json into <name>.json (see the module's text);
    returns the merged results. Raises ValueError, naming the key or the runs, when the two
    files are not one sweep or share a setting and seed; nothing is written then."""
    if source == name:
        raise ValueError(f"--merge={source} and --name={name} are the same file")
    loaded = {}
    for key in (source, name):
        path = os.path.join(RESULTS, f"{key}.json")
        if not os.path.exists(path):
            raise ValueError(f"--merge: no results file {path}; give the names of two files in "
                             f"{RESULTS} without `.json`")
        with open(path) as f:
            loaded[key] = json.load(f)
    into, extra = loaded[name], loaded[source]
    value = lambda results, key: (sweep_model(results) if key == "model"  # noqa: E731
                                  else results.get(key))
    for key in SWEEP_KEYS:
        if value(into, key) != value(extra, key):
            raise ValueError(f"--merge: {source} and {name} are not one sweep: their `{key}` "
                             f"differs ({str(value(extra, key))[:80]} vs "
                             f"{str(value(into, key))[:80]})")
    pairs = lambda results: {(run["setting"], run["seed"]) for run in results["runs"]}  # noqa: E731
    twice = sorted(pairs(into) & pairs(extra))
    if twice:
        raise ValueError(f"--merge: {source} and {name} both hold runs of (setting, seed) "
                         f"{twice}; remove one of them first")
    merged = dict(into, runs=into["runs"] + extra["runs"])
    merged["merged"] = into.get("merged", []) + extra.get("merged", []) + [
        {key: extra[key] for key in ("command", "commit", "block_statistics_command")
         if key in extra} | {"settings_and_seeds": [list(pair) for pair in sorted(pairs(extra))]}]
    # Shares at initialization do not depend on the runs, so either file's will do.
    if "initial_branch_shares" in extra and "initial_branch_shares" not in into:
        merged["initial_branch_shares"] = extra["initial_branch_shares"]
    write_results(name, merged, commit_text=into["commit"])
    os.remove(os.path.join(RESULTS, f"{source}.json"))
    return merged


def run(setting, seed, steps, data, precision, model=DEFAULT_MODEL):
    config = run_config(setting, seed, steps, data, precision, model=model)
    model_dir = config.model_dir
    shutil.rmtree(model_dir, ignore_errors=True)  # a fresh run, never a resumed one
    started = time.time()
    results = trainer.train_and_evaluate(config)
    model = last_model(config)
    loss = heldout_loss(config, model)
    curve = read_metrics(model_dir)
    return {"setting": setting, "seed": seed, "overrides": setting_overrides(setting),
            "steps": results["step"], "precision": precision, "cpu": cpu_name(),
            "heldout_nats": loss["nats_per_byte"],
            "heldout_pairs": loss["pairs"], "heldout_skipped": loss["skipped"],
            "learned_gates": learned_gates(model),
            "valid_bleu": results["valid"]["bleu"], "valid_chrf": results["valid"]["chrf"],
            "valid_reached_bound": results["valid"].get("reached_bound"),
            "train_loss_last_10_logs": mean_last_loss(curve),
            "max_gradient_norm": max([row.get("gradient_norm", 0) for row in curve] + [0]),
            "train_seconds": results["total_train_seconds"],
            "wall_seconds": time.time() - started, "curve": curve}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL, choices=zoo.list_models())
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--precision", default="float32", choices=devices.PRECISIONS)
    parser.add_argument("--name", default=None,
                        help="results file docs/results/<name>.json "
                             "(default residual_text_<steps>steps)")
    parser.add_argument("--add_block_statistics", metavar="NAME", default=None,
                        help="train nothing: fill the learned gate values and each block's "
                             "branch share into docs/results/NAME.json from its runs' "
                             "checkpoints under --runs")
    parser.add_argument("--runs", default=RUNS, help="the runs folder of --add_block_statistics")
    parser.add_argument("--merge", metavar="SOURCE", default=None,
                        help="train nothing: move the runs of docs/results/SOURCE.json into "
                             "docs/results/NAME.json (--name), then remove SOURCE.json")
    args = parser.parse_args()
    if args.merge:
        if not args.name:
            parser.error("--merge needs --name, the results file to merge into")
        try:
            merged = merge_results(args.merge, args.name)
        except ValueError as error:
            parser.error(str(error))
        print(f"merged {args.merge} into {args.name}: {len(merged['runs'])} runs")
        return
    if args.add_block_statistics:
        # The split is written to a fresh folder: a sweep may be reading the runs folder's.
        data, _ = held_out_data(tempfile.mkdtemp(prefix="residual_text_"))
        add_block_statistics(args.add_block_statistics, data, args.runs)
        return
    settings = args.settings.split(",")
    for setting in settings:
        setting_overrides(setting)  # fail before any training on a bad name
    name = args.name or f"residual_text_{args.steps}steps"
    data, held_out = held_out_data(os.path.join(RUNS, "translator", "data"))
    command = ("python experiments/residual_text.py "
               + (f"--model={args.model} " if args.model != DEFAULT_MODEL else "")
               + f"--steps={args.steps} "
               f"--settings={args.settings} --seeds={args.seeds} --precision={args.precision}"
               + (f" --name={args.name}" if args.name else ""))
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for setting in settings:
            runs.append(run(setting, seed, args.steps, data, args.precision, args.model))
            row = runs[-1]
            print(f"{setting} seed {seed}: held-out {row['heldout_nats']:.4f} nats/byte, "
                  f"greedy BLEU {row['valid_bleu']:.2f}, chrF {row['valid_chrf']:.1f}, train "
                  f"loss {row['train_loss_last_10_logs']:.3f}, max gradient norm "
                  f"{row['max_gradient_norm']:.2f}, {row['wall_seconds']:.0f} s", flush=True)
            path = write_results(name, {
                "command": command, "model": args.model, "steps": args.steps,
                "weights": WEIGHTS,
                "held_out_validation": held_out, "valid_sentences": VALID_SENTENCES,
                "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
