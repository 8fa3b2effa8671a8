"""The README's single-run examples compose and pass the config checks as written (a renamed key or option
breaks this test, not a reader's first try)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bnnpred.app.compose import compose
from bnnpred.app.run_checks import check_config
from bnnpred.app.run_setup import typed

README = Path(__file__).resolve().parents[1] / "README.md"


def train_examples() -> list[list[str]]:
    """The overrides of every ``bnnpred train`` command in the README's shell blocks, sweeps (``-m``) left out."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    examples = []
    for command in commands:
        words = shlex.split(command, comments=True)
        if words[:2] == ["bnnpred", "train"] and "-m" not in words:
            overrides = [w for w in words[2:] if not w.startswith("-")]
            if not any(w.startswith("[") for w in overrides):  # the usage line "[group=option ...]"
                examples.append(overrides)
    return examples


def test_the_readme_has_train_examples():
    assert len(train_examples()) >= 10


@pytest.mark.parametrize("overrides", train_examples(), ids=lambda o: " ".join(o)[:60])
def test_a_readme_train_example_composes_and_passes_the_checks(overrides):
    check_config(typed(compose(overrides)))
