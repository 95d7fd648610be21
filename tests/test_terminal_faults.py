"""What a terminal does to sdpa: stdout closed or full, encodings it cannot print, names
that are not UTF-8, Ctrl-C at any moment. Real subprocesses, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_faults import default_signals

from sdpa_cli import registry
from sdpa_cli.report import manifest

ROOT = Path(__file__).resolve().parent.parent
VARIANCE = ROOT / "experiments" / "variance"
SMALL = ["variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO"))}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="120", **extra)
    return env


def _sdpa(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = _env(**kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "sdpa_cli", *args], cwd=cwd, env=env,
                          capture_output=True, timeout=300, check=False, **kw)


def _leftovers(root: Path) -> list[str]:
    """Temporary folders, files or links that sdpa left behind (.NAME.tmp-PID-…)."""
    return [str(p) for p in root.rglob("*") if ".tmp-" in p.name]


# --- stdout closed, full, or unable to encode ---------------------------------------------------


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_closed_stdout_with_a_table_still_writes_the_folder(tmp_path):
    done = subprocess.run(f"{sys.executable} -m sdpa_cli {' '.join(SMALL)} --out run >&-",
                          shell=True, cwd=tmp_path, env=_env(), capture_output=False,
                          stderr=subprocess.PIPE, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert manifest.run_folder_problem(tmp_path / "run") == ""


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_closed_stdout_refuses_a_document_before_running(tmp_path):
    done = subprocess.run(f"{sys.executable} -m sdpa_cli {' '.join(SMALL)} --format json "
                          "--out run >&-", shell=True, cwd=tmp_path, env=_env(),
                          stderr=subprocess.PIPE, timeout=300, check=False)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("--format json: stdout is closed")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_full_stdout_is_one_line_not_an_internal_error(tmp_path):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "sdpa_cli", *SMALL, "--format", "json",
                               "--out", "run"], cwd=tmp_path, env=_env(), stdout=full,
                              stderr=subprocess.PIPE, timeout=300, check=False)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "cannot write the document to stdout: No space left on device" in lines[0]
    assert "internal error" not in lines[0]
    assert manifest.run_folder_problem(tmp_path / "run") == ""  # the folder is whole


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"},
                                 {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}],
                         ids=["pythonioencoding-ascii", "lc-all-c"])
def test_an_ascii_terminal_gets_ascii_spellings(tmp_path, env):
    done = _sdpa([*SMALL, "--out", "run"], tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert text.isascii() and b"Traceback" not in text
    assert b"sqrt" in text and b"sigma" in text  # √ and σ spelt out, not dropped
    assert manifest.run_folder_problem(tmp_path / "run") == ""
    # a spec name that is not UTF-8, echoed on the same terminal: escaped, not a crash
    bad = os.fsencode(tmp_path) + b"/\xff.yaml"
    done = subprocess.run([sys.executable, "-m", "sdpa_cli", "variance", bad], cwd=tmp_path,
                          env=_env(**env), capture_output=True, timeout=300, check=False)
    assert done.returncode == 2 and b"\\xff.yaml: no such file" in done.stderr, done.stderr


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_out_name_not_utf8_is_written_and_echoed_escaped(tmp_path):
    out = os.fsencode(tmp_path) + b"/run-\xff"
    done = subprocess.run([sys.executable, "-m", "sdpa_cli", *SMALL, "--out", out],
                          cwd=tmp_path, env=_env(), capture_output=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert b"run-\\xff" in done.stdout and b"Traceback" not in done.stderr
    assert manifest.run_folder_problem(Path(os.fsdecode(out))) == ""


# --- symlinked targets: the link stays, no temporary link is left ------------------------------


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("how", ["out", "outputs"])
def test_symlinked_run_folder_keeps_its_link_and_leaves_nothing(tmp_path, how):
    assert _sdpa([*SMALL, "--out", "real"], tmp_path).returncode == 0
    link = tmp_path / "link" if how == "out" else tmp_path / "outputs" / "variance"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(tmp_path / "real")
    args = [*SMALL, "--out", "link"] if how == "out" else SMALL
    done = _sdpa(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and manifest.run_folder_problem(tmp_path / "real") == ""
    assert _leftovers(tmp_path) == []


# --- Ctrl-C at any moment: exit 130, no traceback, nothing half-written ------------------------


def _interrupt_once(tmp_path: Path, delay: float, i: int) -> tuple[int, str]:
    out = tmp_path / f"batch{i}"
    proc = subprocess.Popen([sys.executable, "-m", "sdpa_cli", "run", str(VARIANCE), "--out",
                             str(out), "-q", "--workers", "2"], cwd=tmp_path, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=default_signals)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    text = err.decode(errors="replace")
    # nothing half-written: every run folder is whole, no temporary is left
    assert _leftovers(tmp_path) == [], (delay, text)
    if out.is_dir():
        for child in out.iterdir():
            if child.is_dir():
                assert manifest.run_folder_problem(child) == "", (delay, child)
    return proc.returncode, text


@pytest.mark.slow
def test_ctrl_c_at_any_moment_is_exit_130(tmp_path):
    # From the first millisecond into a batch of seven specs (about 10 s idle): Python's
    # start-up every ×1.19 up to 60 ms, sdpa's imports, spec loading and first specs every
    # ×1.12 up to about 0.8 s, then later specs at 2 and 4 s (50 ending times as before, the
    # loop's sleeps 13 s instead of 31 s)
    delays = [0.001 * 1.19 ** i for i in range(24)] + [0.06 * 1.12 ** i for i in range(24)] \
        + [2.0, 4.0]
    codes: list[int] = []
    early: list[float] = []
    for i, delay in enumerate(delays):
        code, err = _interrupt_once(tmp_path, delay, i)
        codes.append(code)
        assert "Exception ignored" not in err and "internal error" not in err, (delay, err)
        if code not in (0, 130) and "sdpa" not in err:
            # Python's own start-up (site, runpy), before sdpa's first line can run: killed by
            # the signal (the shell shows 130) or Python's "Fatal Python error" in site. No
            # code of sdpa runs there; it must never happen once sdpa_cli is importing.
            assert delay < 0.25, (delay, code, err)
            early.append(delay)
            continue
        assert "Traceback" not in err, (delay, err)
        assert code in (130, 0), (delay, code, err)  # 0 only when the batch already ended
        if code == 130:
            assert err.strip().splitlines()[-1] == "sdpa: interrupted", (delay, err)
    # the loop did reach sdpa's imports, spec loading, computing and writing, not only
    # Python's start-up (about the first 60 ms on a busy machine)
    assert codes.count(130) >= 20, (codes, early)


def test_a_ctrl_c_turned_into_another_error_ends_the_batch(sdpa, workdir, monkeypatch):
    # An interrupt during an import can surface as ImportError ("initialization failed");
    # with Ctrl-C pressed, the batch must stop with 130, not record an error and go on.
    from sdpa_cli import process, registry

    specs = workdir / "specs"
    specs.mkdir()
    for name in ("a", "b"):
        (specs / f"{name}.yaml").write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n",
                                            encoding="utf-8")
    study = registry.get("variance")
    calls = []

    def broken(spec, ctx):
        calls.append(spec.name)
        process._pending.set()  # what the SIGINT handler records
        raise ImportError("initialization failed")

    monkeypatch.setattr(registry, "get", lambda name: type(study)(
        **{**study.__dict__, "run": broken}))
    try:
        r = sdpa("run", "specs", "--out", "batch", "-q", "--no-plots")
    finally:
        process._pending.clear()
    assert r.code == 130, r.err
    assert calls == ["a"]  # the batch did not go on to the next spec
    assert r.err.strip().splitlines()[-1] == "sdpa: interrupted"
    assert not (workdir / "batch" / "index.md").exists()
    assert _leftovers(workdir) == []


# --- every document into a full stdout -------------------------------------------------------


def _to_full_stdout(*args: str) -> tuple[int, str]:
    import subprocess
    import sys
    import tempfile

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "sdpa_cli", *args], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120,
                           cwd=tempfile.gettempdir())  # not the checkout: the sdpa installed
    return p.returncode, p.stderr



@pytest.mark.parametrize("args", [[], ["--version"]], ids=str)  # the rest: slow tier
def test_help_and_version_into_a_full_stdout_are_one_line(args):
    code, err = _to_full_stdout(*args)
    assert code == 1 and err == "sdpa: cannot write to stdout: No space left on device\n", err



@pytest.mark.slow
def test_every_command_and_topic_into_a_full_stdout_is_one_line(tmp_path):
    """Every command's --help, the tool commands' documents, every topic page: one line and
    exit 1 when stdout is full (help and --version raised an internal error)."""
    from sdpa_cli.io import topics

    commands = [*registry.NAMES, "run", "compare", "validate", "help"]
    cases = [["--help"], *([c, "--help"] for c in commands),
             *(["help", t] for t in topics.pages()),
             ["variance", "--list"], ["variance", "--dims", "3", "--pairs", "10", "--no-write",
                                      "--no-plots", "--format", "json"]]
    for args in cases:
        code, err = _to_full_stdout(*args)
        assert code == 1 and len(err.strip().splitlines()) == 1, (args, err)
        assert "cannot write" in err and "internal error" not in err, (args, err)

