"""Interruption and write failures lose nothing: real subprocesses, real signals."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Real subprocesses killed mid-run: the slow tier (.ci/run runs it with -m slow).
pytestmark = pytest.mark.slow

SLOW_TO_DRAW = ["--dims", *[str(d) for d in range(2, 42)], "--pairs", "300", "--bins", "200"]
SLOW_TO_COMPUTE = ["--dims", "4096", "--pairs", "3000000", "--no-plots", "--workers", "2"]


# The signals these tests send. sdpa keeps a signal its parent ignored ignored (nohup, a
# background job: that is what the user asked), so each child starts with them at their
# default, whatever the disposition the test run itself inherited.
SENT = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1)


def default_signals() -> None:
    """In the child, before it runs Python: the signals the tests send at their default."""
    for signum in SENT:
        signal.signal(signum, signal.SIG_DFL)


def _sdpa(cwd: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sdpa_cli", "variance", *args],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals, **kw)


def _finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str]:
    """Wait for the process and close its pipes; (exit code, stderr)."""
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir())}


def _temps(parent: Path, name: str) -> list[Path]:
    return sorted(parent.glob(f".{name}.tmp-*"))


@pytest.fixture
def previous(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A good run folder from an earlier run, and the hashes of its files."""
    code, err = _finish(_sdpa(tmp_path, "--dims", "3", "--pairs", "50", "--seed", "1",
                              "--out", "run", "-q"))
    assert code == 0, err
    folder = tmp_path / "run"
    return folder, _snapshot(folder)


def _wait_for_temp(tmp_path: Path, proc: subprocess.Popen, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _temps(tmp_path, "run")
        if found:
            return found[0]
        if proc.poll() is not None:
            _finish(proc)
            raise AssertionError("the run ended before it started writing")
        time.sleep(0.001)
    raise AssertionError("no temporary run folder appeared")


def _wait_for_compute(proc: subprocess.Popen) -> None:
    """Readiness: the engine's block threads exist (--workers 2), so the run is computing.
    A signal sent before that would test start-up, not an interrupted computation."""
    status = Path(f"/proc/{proc.pid}/status")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _finish(proc)
            raise AssertionError("the run ended before it started computing")
        try:
            threads = next(int(line.split()[1]) for line in status.read_text().splitlines()
                           if line.startswith("Threads:"))
        except (OSError, StopIteration):
            threads = 0
        if threads > 1:
            return
        time.sleep(0.001)
    raise AssertionError("the run never started its block threads")


def test_sigkill_while_writing_leaves_previous_folder_intact(tmp_path, previous):
    folder, before = previous
    proc = _sdpa(tmp_path, *SLOW_TO_DRAW, "--seed", "2", "--out", "run", "-q")
    _wait_for_temp(tmp_path, proc)
    proc.kill()
    _finish(proc)
    assert _snapshot(folder) == before  # byte for byte
    assert _temps(tmp_path, "run")  # the killed run's half-written folder, beside it
    # The next run removes what the killed one left, then swaps in its own folder.
    again = _sdpa(tmp_path, "--dims", "3", "--pairs", "50", "--seed", "3", "--out", "run", "-q")
    assert _finish(again)[0] == 0
    assert _temps(tmp_path, "run") == []
    assert _snapshot(folder) != before


def test_sigkill_while_computing_writes_nothing(tmp_path, previous):
    folder, before = previous
    proc = _sdpa(tmp_path, *SLOW_TO_COMPUTE, "--out", "run", "-q")
    _wait_for_compute(proc)
    proc.kill()
    _finish(proc)
    assert _snapshot(folder) == before
    assert _temps(tmp_path, "run") == []


@pytest.mark.parametrize("phase", ["computing", "writing"])
def test_ctrl_c_exits_130_and_removes_its_temporary_folder(tmp_path, previous, phase):
    folder, before = previous
    if phase == "writing":
        proc = _sdpa(tmp_path, *SLOW_TO_DRAW, "--seed", "2", "--out", "run")
        _wait_for_temp(tmp_path, proc)
    else:
        proc = _sdpa(tmp_path, *SLOW_TO_COMPUTE, "--out", "run")
        _wait_for_compute(proc)
    proc.send_signal(signal.SIGINT)
    code, err = _finish(proc)
    assert code == 130
    assert err.strip().splitlines()[-1] == "sdpa: interrupted"
    assert "Traceback" not in err
    assert _snapshot(folder) == before
    assert _temps(tmp_path, "run") == []


def test_sigterm_cleans_up_too(tmp_path, previous):
    folder, before = previous
    proc = _sdpa(tmp_path, *SLOW_TO_DRAW, "--seed", "2", "--out", "run")
    _wait_for_temp(tmp_path, proc)
    proc.terminate()
    assert _finish(proc)[0] == 128 + signal.SIGTERM
    assert _snapshot(folder) == before
    assert _temps(tmp_path, "run") == []


@pytest.mark.parametrize("signum, said", [(signal.SIGHUP, "sdpa: hung up"),
                                           (signal.SIGUSR1, "sdpa: terminated by SIGUSR1")])
def test_a_hang_up_or_another_ending_signal_cleans_up_as_sigterm_does(tmp_path, previous,
                                                                      signum, said):
    """The terminal closing mid-write (SIGHUP) ended sdpa at once and left `.run.tmp-…`."""
    folder, before = previous
    proc = _sdpa(tmp_path, *SLOW_TO_DRAW, "--seed", "2", "--out", "run")
    _wait_for_temp(tmp_path, proc)
    proc.send_signal(signum)
    code, err = _finish(proc)
    assert code == 128 + signum
    assert err.strip().splitlines()[-1] == said and "Traceback" not in err
    assert _snapshot(folder) == before
    assert _temps(tmp_path, "run") == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_the_parent_ignored_stays_ignored(tmp_path, previous, signum):
    """nohup (SIGHUP) and a shell's background job (SIGINT) start sdpa with the signal
    ignored: it runs to the end, exit 0, as the user asked."""
    folder, before = previous

    def ignore() -> None:
        default_signals()
        signal.signal(signum, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, "-m", "sdpa_cli", "variance", *SLOW_TO_DRAW,
                             "--seed", "2", "--out", "run", "-q"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore)
    _wait_for_temp(tmp_path, proc)
    proc.send_signal(signum)
    code, err = _finish(proc)
    assert code == 0, err
    assert _snapshot(folder) != before and _temps(tmp_path, "run") == []


def test_full_disk_is_exit_1_and_keeps_the_previous_folder(sdpa, workdir, monkeypatch):
    assert sdpa("variance", "--dims", "3", "--pairs", "20", "--seed", "1", "-q").code == 0
    folder = workdir / "outputs" / "variance"
    before = _snapshot(folder)
    real = Path.write_text

    def full(self, data, *a, **kw):
        if self.name == "table.md":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data, *a, **kw)

    monkeypatch.setattr(Path, "write_text", full)
    r = sdpa("variance", "--dims", "3", "--pairs", "20", "--seed", "2")
    assert r.code == 1
    assert r.err.strip().splitlines()[-1] == (
        "cannot write table.md for outputs/variance: No space left on device; the previous "
        "run folder, if any, is unchanged")
    assert _snapshot(folder) == before
    assert _temps(folder.parent, "variance") == []


def _mount(tmp_path: Path, name: str, options: str) -> Path:
    point = tmp_path / name
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    return point


@pytest.fixture
def mounts(tmp_path):
    made: list[Path] = []

    def make(name: str, options: str) -> Path:
        made.append(_mount(tmp_path, name, options))
        return made[-1]

    yield make
    for point in made:
        subprocess.run(["umount", str(point)], check=False)


def test_really_full_disk(tmp_path, mounts):
    tiny = mounts("tiny", "size=64k")
    proc = _sdpa(tmp_path, "--dims", "3", "100", "--pairs", "500", "--out", str(tiny / "run"))
    code, err = _finish(proc)
    assert code == 1
    assert "No space left on device" in err and "Traceback" not in err
    assert list(tiny.iterdir()) == []  # nothing half-written left behind


def test_read_only_folder_fails_before_computing(tmp_path, mounts):
    ro = mounts("ro", "ro,size=64k")
    start = time.monotonic()
    proc = _sdpa(tmp_path, *SLOW_TO_COMPUTE, "--out", str(ro / "run"))
    code, err = _finish(proc)
    assert code == 1
    assert time.monotonic() - start < 10  # refused before the minutes of drawing
    assert err.strip() == f"cannot write in {ro}: Read-only file system"


def test_a_reader_leaving_early_is_not_an_error(tmp_path):
    # `sdpa … --format json | head -c 10`: the pipe breaks, sdpa still ends with 0, silently.
    done = subprocess.run(
        f"{sys.executable} -m sdpa_cli variance --dims 3 100 --pairs 200000 --format json -q "
        "--no-plots | head -c 10; exit ${PIPESTATUS[0]}",
        shell=True, executable="/bin/bash", cwd=tmp_path, capture_output=True, text=True,
        check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{\n  "schema_version"'[:10] and done.stderr == ""
