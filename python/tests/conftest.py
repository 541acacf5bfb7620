import zlib

import numpy as np
import pytest

import ropejit


@pytest.fixture(scope="session")
def runtime(tmp_path_factory):
    """One host-backend runtime for the session, its kernel cache in a temporary folder."""
    return ropejit.Runtime("host", cache_dir=str(tmp_path_factory.mktemp("ropejit-cache")))


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded by the test's name (reproducible, different per test)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def patched():
    """ropejit.transformers.patch() for the test, unpatched afterwards even when the test fails."""
    import ropejit.transformers as rope_hf  # torch and transformers: only the tests that use it need them

    models = []

    def do_patch(model, **kwargs):
        models.append(model)
        return rope_hf.patch(model, **kwargs)

    yield do_patch
    for model in models:
        rope_hf.unpatch(model)
