"""WMT news test sets (newstest2013 and later) through sacrebleu's test-set downloader.

In: a year and a language pair. Out: the paths of the plain-text source and reference files,
which sacrebleu downloads once and caches as

    <cache>/wmtYY/wmtYY.<src>-<tgt>.src     the source side, one segment per line
    <cache>/wmtYY/wmtYY.<src>-<tgt>.ref     the reference
    <cache>/wmtYY/wmtYY.<src>-<tgt>.{docid,genre,origlang}

The cache is `$SACREBLEU` (default `~/.sacrebleu`), or `data_dir` when one is given. Offline,
files laid out like this are read without any network access.
"""

import copy
import os

from pipelines.options import ConfigError, MissingFileError

YEARS = tuple(range(2013, 2020))


def _sacrebleu_dataset(year, data_dir):
    from sacrebleu.dataset import DATASETS  # imported here: only this dataset needs it

    if year not in YEARS:
        raise ConfigError(f"newstest year {year} is unknown; choose one of: "
                         f"{', '.join(map(str, YEARS))}")
    name = f"wmt{year % 100}"
    dataset = DATASETS[name]
    if data_dir:
        # sacrebleu fixes its cache directory at import time; point a copy at data_dir instead.
        dataset = copy.copy(dataset)
        dataset._outdir = os.path.join(data_dir, name)
        dataset._rawdir = os.path.join(dataset._outdir, "raw")
    return dataset


def newstest_files(year, source_lang="de", target_lang="en", data_dir=None):
    """Returns `(source_file, reference_file)` of newstest`year`, downloading them if needed.

    Raises:
        ConfigError: the year or the language pair is unknown.
        MissingFileError: the files are neither cached nor downloadable; the message names the
            expected path and how to get the files.
    """
    dataset = _sacrebleu_dataset(year, data_dir)
    langpair = f"{source_lang}-{target_lang}"
    if langpair not in dataset.langpairs:
        raise ConfigError(f"newstest{year} has no {langpair}; it has: "
                         f"{', '.join(sorted(dataset.langpairs))}")
    expected = dataset._get_txt_file_path(langpair, "src")
    try:
        files = dataset.get_files(langpair)
    except (Exception, SystemExit) as error:  # sacrebleu calls sys.exit on some failures
        raise MissingFileError(
            f"newstest{year} ({langpair}) is not cached at {expected} and could not be "
            f"downloaded ({type(error).__name__}: {error}). On a machine with network, run "
            f"`sacrebleu -t {dataset.name} -l {langpair} --echo src > /dev/null`, then copy "
            f"~/.sacrebleu/{dataset.name} to {os.path.dirname(expected)}, or pass "
            "data_dir=DIR with DIR/<wmtYY>/ laid out that way.") from error
    fields = dataset.fieldnames(langpair)
    return files[fields.index("src")], files[fields.index("ref")]
