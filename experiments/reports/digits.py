"""Digits: the synthetic task, on our clean split and as the thesis ran and scored it."""

from experiments.reports.common import load, provenance


THESIS_DIGITS = {"bytenet": "about 0.30", "bytenet_simplified": "0.25",
                 "bytenet_selu": "0.30-0.40"}


def digits_section(result):
    lines = ["### Synthetic digits (thesis sizes, our clean split, exact match)", "",
             "> Data note (added with the faithful `thesis` digits config): the runs below used "
             "128 distinct", "> training numbers and 128 distinct test numbers that never occur "
             "in training, now called", "> `--digits_config=thesis_clean`. The thesis itself "
             "drew both sets with replacement from", "> `RandomState(10)` / `RandomState(11)`, "
             "so 28 of its 128 test items (22%) are training items, and", "> it scored a "
             "per-character error, not exact match; `--digits_config=thesis` now rebuilds its",
             "> data exactly. The comparison with the thesis below is therefore not like for "
             "like.", "", provenance(result, seeds="0"), "",
             "Hidden 20, 128 training numbers of 2-3 digits, 300 epochs, Adam 1e-3 (constant), "
             "batch 16; misclassification = 1 - exact match on the 128 held-out numbers.", "",
             "| model | misclassification | thesis (per-character error on its own data: not "
             "comparable, see the next table) | seconds |", "|---|---|---|---|"]
    for name, row in result["thesis_config"].items():
        lines.append(f"| {name} | {row['misclassification']:.3f} | {THESIS_DIGITS.get(name, '-')} "
                     f"| {row['seconds']:.0f} |")
    lines += ["", "Recipes on the same 128 training numbers:", "",
              "| recipe | model | misclassification |", "|---|---|---|"]
    for name, row in result["recipes"].items():
        lines.append(f"| `{name}` | {row['model']} | {row['misclassification']:.3f} |")
    return lines


def thesis_digits_section(result):
    lines = ["### Digits as the thesis ran and scored it", "", provenance(result), "",
             "`--digits_config=thesis` (the thesis's RandomState draws: 28 of the 128 test items "
             "are training items), the thesis code's architecture (`bytenet_thesis` = its `v1`, "
             "`bytenet_selu_thesis` = its `v1-selu`) at hidden 20 and 3 stacks, batch 16, 2400 "
             "steps (300 epochs), Adam at a constant 1e-3, float32, no dropout. Character error "
             "= the thesis's per-character misclassification rate (wrong greedy output bytes "
             "over reference bytes plus EOS); exact match over whole strings. The thesis "
             "reported a misclassification rate of about 0.30 for ByteNet and 0.30-0.40 for "
             "SELU ByteNet (read from its plots).", "",
             "| model | seed | train loss | char. error, test (all 128) | char. error, test "
             "overlap (28) | char. error, test clean (100) | exact match, test | exact match, "
             "train | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    by_model = {}
    for run in result["runs"]:
        by_model.setdefault(run["model"], []).append(run)
        lines.append(f"| {run['model']} | {run['seed']} | {run['train_loss']:.4f} "
                     f"| {run['test']['character_error']:.3f} "
                     f"| {run['test_overlap']['character_error']:.3f} "
                     f"| {run['test_clean']['character_error']:.3f} "
                     f"| {run['test']['exact_match']:.3f} | {run['train']['exact_match']:.3f} "
                     f"| {run['seconds']:.0f} |")
    for model, runs in by_model.items():
        mean = lambda key, part: sum(r[part][key] for r in runs) / len(runs)  # noqa: E731
        lines.append(f"| **{model} mean** | {len(runs)} seeds | | "
                     f"**{mean('character_error', 'test'):.3f}** "
                     f"| {mean('character_error', 'test_overlap'):.3f} "
                     f"| {mean('character_error', 'test_clean'):.3f} "
                     f"| {mean('exact_match', 'test'):.3f} | {mean('exact_match', 'train'):.3f} | |")
    return lines


def render():
    """The section's subsections, from digits.json and digits_thesis.json."""
    lines = []
    for name, section in (("digits", digits_section), ("digits_thesis", thesis_digits_section)):
        result = load(name)
        lines += (section(result) if result else [f"### `{name}`", "", "Not run yet."]) + [""]
    return lines
