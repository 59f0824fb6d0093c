"""Real translation: German->English translation at small scale, one model per run.

    python experiments/real_translation.py --model=bytenet_selu --minutes=30
    python experiments/real_translation.py --model=bytenet_small --minutes=30

Trains on ../shared/data/deen/train.* (60k real pairs) for a wall-clock budget, validating on
100 sentences of newstest2013 (dev.*), then scores the exported SavedModel with sacrebleu on
multi30k-test2016 and newstest2015. Writes docs/results/real_translation_<model>.json with the
training curve. Run the two models at the same time for the same budget to compare them on
equal hardware shares.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import logging  # noqa: E402

from bytenet_tf import inference, scoring  # noqa: E402
from bytenet_tf.training import trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments.common import BEFORE_TEXT_PRESET, RUNS, read_metrics, write_results  # noqa: E402
from shared_data import deen  # noqa: E402
from pipelines import datasets, text  # noqa: E402

TEST_SETS = ("multi30k-test2016", "newstest2015")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="bytenet_selu")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--test_sentences", type=int, default=0,
                        help="Score only the first N sentences of each test set (0: all).")
    parser.add_argument("--name", default=None, help="Results name (default real_translation_<model>).")
    args = parser.parse_args()
    logging.set_verbosity(logging.INFO)
    name = args.name or f"real_translation_{args.model}"
    model_dir = os.path.join(RUNS, name)
    data = datasets.DataSpec(dataset="text", source_file=deen("train.de"),
                             target_file=deen("train.en"), valid_source_file=deen("dev.de"),
                             valid_target_file=deen("dev.en"))
    config = TrainConfig(model=args.model, data=data, model_dir=model_dir,
                         export_dir=os.path.join(model_dir, "export"), batch_size=args.batch_size,
                         train_steps=1_000_000, shuffle_buffer=10000, **BEFORE_TEXT_PRESET,
        time_budget_seconds=60 * args.minutes,
                         learning_rate=args.learning_rate, warmup_steps=200, eval_every=400,
                         valid_size=100, checkpoint_every=200, precision=args.precision,
                         progress=False, seed=0)
    started = time.time()
    results = trainer.train_and_evaluate(config)
    signature, _ = inference.load_saved_model(results["export_path"])
    translate_fn = inference.as_translate_fn(signature)
    scores = {}
    for test_set in TEST_SETS:
        sources, references, _ = text.read_parallel_lines(deen(f"{test_set}.de"),
                                                          deen(f"{test_set}.en"))
        if args.test_sentences:
            sources, references = sources[:args.test_sentences], references[:args.test_sentences]
        hypotheses = inference.translate_batches(translate_fn, sources, batch_size=64)
        scores[test_set] = scoring.score(hypotheses, references)
        scores[test_set]["examples"] = [
            {"source": s.decode("utf-8", "replace"), "hypothesis": h.decode("utf-8", "replace"),
             "reference": r.decode("utf-8", "replace")}
            for s, h, r in list(zip(sources, hypotheses, references))[:3]]
        print(f"{args.model} {test_set}: BLEU {scores[test_set]['bleu']:.2f} "
              f"chrF {scores[test_set]['chrf']:.2f}")
    path = write_results(name, {
        "command": f"python experiments/real_translation.py --model={args.model} "
                   f"--minutes={args.minutes:g}",
        "model": args.model, "minutes": args.minutes, "steps": results["step"],
        "precision": results["precision"], "train_loss": results["train_loss"],
        "valid_dev100": results["valid"], "test": scores,
        "curve": read_metrics(model_dir), "wall_seconds": time.time() - started})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
