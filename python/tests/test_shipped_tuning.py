"""The shipped tuning files travel inside the package and the installed library finds them
there (docs/tuning.md, "Shipped tuning files"); the C++ tests check what is read from them."""
import os

import ropejit
from ropejit import _ropejit


def test_the_package_holds_the_shipped_tuning_folder_and_the_library_reads_it(monkeypatch):
    monkeypatch.delenv("ROPEJIT_SHIPPED_TUNING_DIR", raising=False)
    folder = os.path.join(os.path.dirname(os.path.realpath(ropejit.__file__)), "tuning")
    assert os.path.isfile(os.path.join(folder, "README.md")), os.listdir(os.path.dirname(folder))
    found, origin = _ropejit.shipped_tuning_dir()
    assert found == folder, origin
    assert "Python package" in origin


def test_none_turns_shipped_files_off(monkeypatch):
    monkeypatch.setenv("ROPEJIT_SHIPPED_TUNING_DIR", "none")
    found, origin = _ropejit.shipped_tuning_dir()
    assert found == ""
    assert "off" in origin
