"""Every Python example in README.md runs as written."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 12


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index):
    import keras

    import keras_tfm

    namespace = {"keras": keras, "keras_tfm": keras_tfm}
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), namespace)
