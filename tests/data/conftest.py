"""Shared fixtures of the data tests: the harvested sentences and one tiny corpus per session.

Both use the machine's text cache ($SPEECHLAB_CACHE or ~/.cache/speechlab); on an empty cache
the first fixture use downloads and reads the Debian packages once (~20-40 s).
"""

from __future__ import annotations

import pytest

from speechlab.data.text_harvest import LANGUAGES, harvest_sentences
from speechlab.testing.corpus import tiny_corpus


@pytest.fixture(scope="session")
def harvested():
    return harvest_sentences(LANGUAGES)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, harvested):
    return tiny_corpus(tmp_path_factory.mktemp("tiny"))
