"""The synthetic digits task of the thesis: English digit words to digits.

    source: b"one zero four"   (lowercase words, single spaces)
    target: b"104"

A number is a string of digits; leading zeros are allowed (`zero seven` -> `07`), so the task is
a pure sequence transduction. Test numbers never occur in training, except in `thesis`, which
keeps the thesis's own overlap.

Training numbers of the `default` configuration are drawn with replacement, with n digits
drawn with probability n/15 (n = 1..5): about 1/15 of the training pairs have one digit and
5/15 have five, yet even the one-digit numbers (10 distinct) each occur about 130 times. Drawn
without replacement, the ten one-digit numbers were 10 of 20,000 pairs, and the main job turned
`one` into `12`.
`independent_numbers` draws numbers of every length independently of both sets, for the
per-length check that bytenet-train reports.

Configurations (`DIGITS_CONFIGS`):
- `thesis`: the thesis's data exactly (its `code/dataset/synthetic_digits.py`): 128 training
  and 128 test items of 2 or 3 digits, each drawn with `np.random.RandomState` (seed 10 for
  training, 11 for test) with replacement, so items repeat within a set and test items occur in
  the training set too (the thesis scored them all). `thesis_rng_items(99, 10)` reproduces the
  thesis's own test fixture.
- `thesis_clean`: the same sizes as distinct numbers (numpy's `default_rng`, seeds 10 and 11),
  with no test number in training: a clean split for the same task.
- `default`: the main job's, 1 to 5 digits, 20000 training and 1000 test numbers.
- `thesis_recombined`: `thesis_clean`'s 128 training and 128 test numbers, plus every other number
  of 2 or 3 digits that can be assembled from the (word, digit) pieces seen in the 128
  training pairs, except the test numbers: data augmentation by recombination, which uses
  nothing but the training pairs (and keeps the test numbers out of training).
"""

import dataclasses
import itertools

import numpy as np

from pipelines.options import ConfigError

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclasses.dataclass(frozen=True)
class DigitsConfig:
    """How many numbers of how many digits, and the seeds that draw them."""
    min_digits: int
    max_digits: int
    train_size: int
    test_size: int
    train_seed: int
    test_seed: int
    recombine: bool = False
    train_with_replacement: bool = False
    length_weighted: bool = False
    thesis_random_state: bool = False


DIGITS_CONFIGS = {
    "thesis": DigitsConfig(2, 3, 128, 128, train_seed=10, test_seed=11,
                           thesis_random_state=True),
    "thesis_clean": DigitsConfig(2, 3, 128, 128, train_seed=10, test_seed=11),
    "default": DigitsConfig(1, 5, 20000, 1000, train_seed=10, test_seed=11,
                            train_with_replacement=True, length_weighted=True),
    "thesis_recombined": DigitsConfig(2, 3, 128, 128, train_seed=10, test_seed=11, recombine=True),
}


def spell(number):
    """`"104"` -> `"one zero four"`."""
    return " ".join(WORDS[int(digit)] for digit in number)


def _draw(config, count, seed, exclude, distinct=True):
    """`count` numbers of `config`'s lengths, none in `exclude`; all different when `distinct`.

    The length is uniform over `min_digits..max_digits`, or drawn with probability proportional
    to itself when `config.length_weighted`; then the digits are uniform."""
    rng = np.random.default_rng(seed)
    lengths = np.arange(config.min_digits, config.max_digits + 1)
    weights = lengths / lengths.sum() if config.length_weighted else None
    available = sum(10 ** int(n) for n in lengths) - len(exclude)
    if distinct and count > available:
        raise ValueError(f"Cannot draw {count} distinct numbers of {config.min_digits}-"
                         f"{config.max_digits} digits; only {available} remain.")
    numbers, seen = [], set(exclude)
    while len(numbers) < count:
        length = int(rng.choice(lengths, p=weights))
        number = "".join(str(d) for d in rng.integers(0, 10, size=length))
        if number not in seen:
            if distinct:
                seen.add(number)
            numbers.append(number)
    return numbers


def thesis_rng_items(seed, count, min_digits=2, max_digits=3):
    """`count` numbers drawn as the thesis draws them: `RandomState(seed)`, with replacement.

    For each item: a length with `randint(min, max + 1, dtype=uint8)`, then its digits with
    `randint(0, 10, size=length, dtype=int8)`; the dtypes select numpy's bounded generators,
    so they are part of the stream.
    """
    rng = np.random.RandomState(seed)
    numbers = []
    for _ in range(count):
        length = rng.randint(min_digits, max_digits + 1, dtype=np.uint8)
        numbers.append("".join(str(int(d)) for d in rng.randint(0, 10, size=length,
                                                                   dtype=np.int8)))
    return numbers


def independent_numbers(config="default", per_length=200, seed=2026):
    """Numbers drawn independently of the training and test sets: `per_length` of each length.

    Leading zeros are allowed and numbers may repeat, as a user's inputs would. Returns a list
    of `(number, seen_in_training)`, grouped by length; `seen_in_training` marks numbers that
    occur in the training set (for 1 and 2 digits, all of them do).
    """
    config = _config(config)
    train = {number.decode() for _, number in digit_pairs(config)[0]}
    rng = np.random.default_rng(seed)
    numbers = ["".join(str(d) for d in rng.integers(0, 10, size=length))
               for length in range(config.min_digits, config.max_digits + 1)
               for _ in range(per_length)]
    return [(number, number in train) for number in numbers]


def recombine(train, min_digits, max_digits, exclude):
    """Every number of `min_digits`..`max_digits` digits whose digits all occur in `train`.

    The pieces are the (word, digit) pairs that the training sources and targets align
    position by position; numbers in `train` or in `exclude` are left out. Sorted, so the
    result is deterministic.
    """
    pieces = sorted({digit for number in train for digit in number})
    numbers = {"".join(chosen) for length in range(min_digits, max_digits + 1)
               for chosen in itertools.product(pieces, repeat=length)}
    return sorted(numbers - set(train) - set(exclude))


def _config(config):
    if isinstance(config, DigitsConfig):
        return config
    if config not in DIGITS_CONFIGS:
        raise ConfigError(f"digits_config={config!r} is unknown; choose one of: "
                         f"{', '.join(DIGITS_CONFIGS)}")
    return DIGITS_CONFIGS[config]


def digit_pairs(config="default"):
    """Returns `(train, test)`, each a list of `(source_bytes, target_bytes)` pairs.

    Args:
        config: a name in `DIGITS_CONFIGS` or a `DigitsConfig`.
    """
    config = _config(config)
    if config.thesis_random_state:
        train = thesis_rng_items(config.train_seed, config.train_size, config.min_digits,
                                 config.max_digits)
        test = thesis_rng_items(config.test_seed, config.test_size, config.min_digits,
                                config.max_digits)
        return _as_pairs(train), _as_pairs(test)
    train = _draw(config, config.train_size, config.train_seed, exclude=(),
                  distinct=not config.train_with_replacement)
    test = _draw(config, config.test_size, config.test_seed, exclude=train)
    if config.recombine:
        train = train + recombine(train, config.min_digits, config.max_digits, exclude=test)
    return _as_pairs(train), _as_pairs(test)


def _as_pairs(numbers):
    return [(spell(n).encode(), n.encode()) for n in numbers]
