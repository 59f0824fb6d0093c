"""What an exported translator writes for five captions and five everyday sentences.

    python experiments/examples.py --saved_model=runs/experiments/translator/exports/recipe_30min_s0 \\
        --name=recipe_30min_s0

The captions are lines 1, 201, 401, 601 and 801 of multi30k-test2016 (fixed by position, not
picked by the output). The everyday sentences and their references are written here, in the
style of Tatoeba, and none of them is a line of ../shared/data/deen/train.de. Writes
docs/results/examples_<name>.json: source, reference and the SavedModel's output for each.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf import inference  # noqa: E402
from experiments.common import RESULTS  # noqa: E402
from shared_data import deen  # noqa: E402

CAPTION_LINES = (1, 201, 401, 601, 801)
EVERYDAY = (
    ("Ich trinke jeden Morgen eine Tasse Kaffee.", "I drink a cup of coffee every morning."),
    ("Meine Schwester wohnt in Berlin.", "My sister lives in Berlin."),
    ("Das Wetter ist heute sehr schön.", "The weather is very nice today."),
    ("Kannst du mir bitte helfen?", "Can you help me, please?"),
    ("Der Zug kommt um acht Uhr an.", "The train arrives at eight o'clock."),
)


def captions():
    """`(source, reference)` of multi30k-test2016 at `CAPTION_LINES` (1-based)."""
    with open(deen("multi30k-test2016.de"), "rb") as f:
        sources = f.read().split(b"\n")
    with open(deen("multi30k-test2016.en"), "rb") as f:
        references = f.read().split(b"\n")
    return [(sources[i - 1].decode(), references[i - 1].decode()) for i in CAPTION_LINES]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saved_model", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    signature, _ = inference.load_saved_model(args.saved_model)
    rows = []
    for kind, pairs in (("caption", captions()), ("everyday", EVERYDAY)):
        outputs = inference.translate_list(signature, [source.encode() for source, _ in pairs])
        rows += [{"kind": kind, "source": source, "reference": reference,
                  "output": output.decode("utf-8", "replace")}
                 for (source, reference), output in zip(pairs, outputs)]
    result = {"command": f"python experiments/examples.py --saved_model={args.saved_model} "
                         f"--name={args.name}", "saved_model": args.saved_model, "rows": rows}
    path = os.path.join(RESULTS, f"examples_{args.name}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
    for row in rows:
        print(f"{row['source']}\n  -> {row['output']}\n  ref {row['reference']}")


if __name__ == "__main__":
    main()
