"""bytenet-translate: source lines on stdin, one translation per line on stdout, in order.

    echo "Guten Morgen." | bytenet-translate --saved_model=saved_models/bytenet_selu_text

Input lines are split on b"\\n" only. A newline or carriage return inside a translation is written
as a space, so line i of the output always translates line i of the input. Inputs longer than the
model's maximum are truncated (see saved_models/README.md).
"""

import sys

from absl import app, flags

from bytenet_tf import cli, inference

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "Export base (newest version used) or version directory.")
cli.define_decoding_flags(__name__)
flags.mark_flag_as_required("saved_model")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    cli.start_decoding()
    signature, _ = inference.load_saved_model(FLAGS.saved_model)
    sources = inference.read_lines(sys.stdin.buffer)
    translations = cli.decode_lines(inference.as_translate_fn(signature), sources)
    out = sys.stdout.buffer
    for translation in translations:
        out.write(inference.one_line(translation) + b"\n")
    out.flush()


def run():
    """Console-script entry point."""
    cli.run(main, __name__, "bytenet-translate")


if __name__ == "__main__":
    run()
