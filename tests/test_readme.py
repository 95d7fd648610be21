"""Every output block of the README is what its command prints now (slow tier): a block
under `<!-- output: COMMAND -->` is rerun in an 80-column terminal and compared line by line.
`python tests/test_readme.py --write` rewrites the blocks from fresh runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"<!-- output: (?P<cmd>.+?) -->\n```\n(?P<out>.*?)```\n", re.S)


def blocks(text: str) -> list[re.Match[str]]:
    return list(BLOCK.finditer(text))


def run(command: str) -> str:
    """What `command` prints (stdout, then stderr) in an 80-column terminal, from an empty
    folder, trailing spaces dropped."""
    argv = shlex.split(command)
    if argv[0] == "sdpa":
        argv = [sys.executable, "-m", "sdpa_cli", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    env = {**os.environ, "COLUMNS": "80", "LINES": "50", "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env,
                              check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n")) + "\n"


def test_the_readme_has_output_blocks_and_stays_short():
    text = README.read_text(encoding="utf-8")
    assert len(blocks(text)) >= 4
    assert len(text.splitlines()) <= 300


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(blocks(README.read_text(encoding="utf-8")))))
def test_every_output_block_is_what_its_command_prints(i):
    block = blocks(README.read_text(encoding="utf-8"))[i]
    assert run(block["cmd"]) == block["out"], f"stale README block: {block['cmd']}"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = README.read_text(encoding="utf-8")
    text = BLOCK.sub(lambda m: f"<!-- output: {m['cmd']} -->\n```\n{run(m['cmd'])}```\n", text)
    README.write_text(text, encoding="utf-8")
