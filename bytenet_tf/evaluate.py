"""bytenet-evaluate: translate a test set with a SavedModel and score it with sacrebleu.

    bytenet-evaluate --saved_model=DIR --source_file=newstest2015.de --reference_file=newstest2015.en
    bytenet-evaluate --saved_model=DIR --dataset=newstest --newstest_year=2014

Every source line is translated, an empty one included, and every line is scored, as
`sacrebleu REF < HYP` would score the `--output_file` it writes (line i answers source line i).
The last line printed is one JSON object with `bleu`, `chrf`, `signature` (BLEU's),
`chrf_signature`, `exact_match`, `sentences` (all lines), `empty_sources`, `empty_references`,
`seconds`, `intra_op_threads` (TensorFlow's threads per op while decoding, from
`--concurrent_batches`) and `saved_model`.
"""

import dataclasses
import json
import time

from absl import app, flags

from bytenet_tf import cli, inference, scoring
from pipelines import newstest, text
from pipelines.datasets import DataSpec
from pipelines.options import ConfigError

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "Export base (newest version used) or version directory.")
flags.DEFINE_string("source_file", None, "Source sentences, one per line.")
flags.DEFINE_string("reference_file", None, "Reference translations, line-aligned with the source.")
flags.DEFINE_enum("dataset", None, ["newstest"], "Instead of files: a WMT news test set.")
# The news-test options are bytenet-train's, with their defaults and help written once.
cli.define_flags([field for field in dataclasses.fields(DataSpec)
                  if field.name in ("newstest_year", "source_lang", "target_lang", "data_dir")],
                 __name__)
flags.DEFINE_string("output_file", None, "Write the translations here, one per source line.")
cli.define_decoding_flags(__name__)
flags.mark_flag_as_required("saved_model")


def _files():
    if FLAGS.dataset == "newstest":
        return newstest.newstest_files(FLAGS.newstest_year, FLAGS.source_lang, FLAGS.target_lang,
                                       FLAGS.data_dir)
    if not (FLAGS.source_file and FLAGS.reference_file):
        raise ConfigError("Pass --source_file and --reference_file, or --dataset=newstest.")
    return FLAGS.source_file, FLAGS.reference_file


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    threads = cli.start_decoding()
    source_file, reference_file = _files()
    sources, references, _ = text.read_aligned_lines(source_file, reference_file)
    signature, path = inference.load_saved_model(FLAGS.saved_model)
    started = time.perf_counter()
    hypotheses = cli.decode_lines(inference.as_translate_fn(signature), sources)
    seconds = time.perf_counter() - started
    hypotheses = [inference.one_line(h) for h in hypotheses]
    if FLAGS.output_file:
        with open(FLAGS.output_file, "wb") as f:
            f.writelines(h + b"\n" for h in hypotheses)
    results = scoring.score(hypotheses, references)
    results.update(seconds=round(seconds, 3), intra_op_threads=threads, saved_model=path,
                   empty_sources=sum(not s for s in sources),
                   empty_references=sum(not r for r in references))
    print(f"BLEU {results['bleu']:.2f} ({results['signature']})")
    print(f"chrF {results['chrf']:.2f} ({results['chrf_signature']})")
    print(json.dumps(results))


def run():
    """Console-script entry point."""
    cli.run(main, __name__, "bytenet-evaluate")


if __name__ == "__main__":
    run()
