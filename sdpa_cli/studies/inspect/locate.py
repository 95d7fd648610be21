"""Where a model is: a folder, a GGUF file, a name in the Hugging Face cache or the Ollama store;
and the one bounded reader for the small files on the way (refs, manifests, configs)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from sdpa_cli.errors import InputError, Problem
from sdpa_cli.io.environment import hub_root
from sdpa_cli.io.jsonio import MAX_DEPTH as MAX_JSON_DEPTH
from sdpa_cli.io.jsonio import JsonError, load_json

MAX_REF = 1024  # a refs/main file holds a commit hash
MAX_MANIFEST = 1024**2  # an Ollama manifest lists a few layers
REVISION = re.compile(r"[\w][\w.-]{0,254}")
OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_NAME = re.compile(r"(?:(?P<ns>[a-z0-9][\w.-]*)/)?(?P<name>[a-z0-9][\w.-]*)"
                         r"(?::(?P<tag>[\w][\w.-]{0,127}))?")
JSON_FAULTS = {"read": "cannot be read", "size": "is too large", "utf8": "is not UTF-8 text",
                "syntax": "is not valid JSON",
                "depth": f"nests more than {MAX_JSON_DEPTH} levels (a model's files never do)"}


def bad(message: str, file: Path | str | None = None, field: str | None = None) -> InputError:
    return InputError(Problem(message, file=str(file) if file is not None else None,
                              field=field))


def kind_of(path: Path) -> str:
    """What a path that is not a regular file is, for a message: 'a FIFO', 'a folder', 'a
    character device', 'a link to nothing'."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a link to nothing" if os.path.islink(path) else "missing"
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: Path, what: str, max_bytes: int) -> bytes:
    """At most max_bytes of a regular file (symbolic links followed, as the Hugging Face cache
    needs; FIFOs and devices refused before a byte is read, so nothing can block or fill
    memory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise bad(f"cannot read {what}: {e.strerror or e}", path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise bad(f"{what} is not a regular file", path)
        if info.st_size > max_bytes:
            raise bad(f"{what} is {info.st_size} bytes; sdpa reads at most {max_bytes}", path)
        data = os.read(fd, max_bytes + 1)
    except OSError as e:
        raise bad(f"cannot read {what}: {e.strerror or e}", path) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise bad(f"{what} is more than {max_bytes} bytes (it grew while read)", path)
    return data


def model_json(path: Path, what: str, max_bytes: int) -> Any:
    """A model file's JSON, bounded in size and depth, its faults said as the model's."""
    raw = read_bounded(path, what, max_bytes)
    try:
        return load_json(raw, what=what, max_bytes=max_bytes, file=str(path))
    except JsonError as e:
        raise bad(f"corrupt {what}: it {JSON_FAULTS.get(e.reason, 'cannot be read')}",
                  path) from None


def ollama_root() -> Path:
    """The Ollama store: $OLLAMA_MODELS, else ~/.ollama/models."""
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env) if env else Path.home() / ".ollama" / "models"


def find(model: str, base: Path | None = None) -> tuple[Path | None, str]:
    """The folder or GGUF file MODEL names (a path, relative to `base` for a spec; a cache name
    such as ORG/NAME; an Ollama name such as smollm2:135m), and where we looked; None when it
    is not on this machine. Never the network."""
    path = Path(model).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if path.is_dir() or path.is_file():
        return path, str(path)
    if os.path.lexists(path):  # a FIFO, a device, a link to nothing: never read, never waited on
        raise bad(f"the model is {kind_of(path)}, not a GGUF file or a model folder", path)
    hub, store = hub_root(), ollama_root()
    where = f"{path}, {hub} or {store}"
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+|[A-Za-z0-9][\w.-]*", model):
        found = _hub(hub / ("models--" + model.replace("/", "--")))
        if found is not None:
            return found, str(found)
    blob = _ollama(model, store)
    return (blob, str(blob)) if blob is not None else (None, where)


def _hub(repo: Path) -> Path | None:
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        text = read_bounded(ref, "the cache's refs/main", MAX_REF).decode("utf-8", "replace")
        name = text.strip()
        if not REVISION.fullmatch(name) or name in (".", ".."):
            raise bad(f"refs/main holds {name[:60]!r}, not a revision name", ref)
        chosen = snapshots / name
        if chosen.is_dir():
            return chosen
    found = sorted(p for p in snapshots.glob("*") if p.is_dir()) if snapshots.is_dir() else []
    return found[0] if found else None


def _ollama(model: str, store: Path) -> Path | None:
    """An Ollama name's model blob: manifests/registry.ollama.ai/NS/NAME/TAG → its layer of
    type image.model → blobs/sha256-HEX. None when the store has no such manifest."""
    m = OLLAMA_NAME.fullmatch(model)
    if m is None:
        return None
    manifest = (store / "manifests" / "registry.ollama.ai" / (m["ns"] or "library") / m["name"]
                / (m["tag"] or "latest"))
    if os.path.lexists(manifest) and not manifest.is_file():
        raise bad(f"the Ollama manifest is {kind_of(manifest)}, not a regular file", manifest)
    if not manifest.is_file():
        return None
    doc = model_json(manifest, "Ollama manifest", MAX_MANIFEST)
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        raise bad("not an Ollama manifest (no list of layers)", manifest, "layers")
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL:
            digest = layer.get("digest")
            if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
                raise bad(f"the model layer's digest {str(digest)[:80]!r} is not sha256:HEX",
                          manifest, "layers")
            blob = store / "blobs" / digest.replace(":", "-")
            if os.path.lexists(blob) and not blob.is_file():
                raise bad(f"names blob {blob.name}, which is {kind_of(blob)}, not a regular "
                          "file", manifest)
            if not blob.is_file():
                raise bad(f"names blob {blob.name}, which is not in {blob.parent}", manifest)
            return blob
    raise bad(f"no layer of type {OLLAMA_MODEL}", manifest, "layers")
