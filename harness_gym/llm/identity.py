"""What a model *is*, as opposed to what it is called: the key of cached replies and a row column.

A local folder (``hf:PATH``, and the embedded model's converted folder) is identified by a
content hash of its weight, config and tokenizer files, so a retrained model in the same
folder, or another model in a folder of the same name, never reuses the first one's replies.
Each file's hash is memoized by (path, inode, size, mtime, ctime) in this process and on disk
under the user cache, so reuse costs a ``stat`` per file. The inode change time is in the key
because mtime alone can be set back: ``cp -p``, ``rsync -a`` and archives restore it, while
writing the file or changing its metadata always moves ``ctime`` (no user can set it).

A served model (``openai:``) is identified by what the server says about it on
``GET /v1/models`` (its id and, where given, ``root``, ``parent``, ``revision``, ``max_model_len``,
``checksum``; vLLM's ``created`` is the time of the request, so it is left out) and by the
``revision`` the user sets in the agent spec. A server that does not answer there is recorded
as ``unverified`` (the served name and the revision alone); it is asked again later, and no
reply is cached under it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

#: Files of a model folder that decide its replies (weights, config, tokenizer, template).
MODEL_FILES = (
    "*.safetensors",
    "*.bin",
    "*.gguf",
    "*.pt",
    "*.pth",
    "*.model",
    "*.tiktoken",
    "*.jinja",
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "vocab*",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template*",
    "*.index.json",
)
#: Fields of a ``/v1/models`` entry that identify the weights behind a served name.
SERVER_FIELDS = ("id", "root", "parent", "revision", "checksum", "max_model_len")

_MEMO: dict[tuple[str, int, int, int, int], str] = {}
_LOCK = threading.Lock()


def _memo_dir() -> Path:
    root = os.environ.get("HARNESS_GYM_CACHE") or Path.home() / ".cache" / "harness-gym"
    return Path(root) / "file-hashes"


def file_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per (path, inode, size, mtime, ctime)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    with _LOCK:
        if key in _MEMO:
            return _MEMO[key]
    memo = _memo_dir() / (hashlib.sha1(repr(key).encode()).hexdigest() + ".txt")
    try:
        digest = memo.read_text().strip()
    except OSError:
        digest = ""
    if len(digest) != 64:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_name(memo.name + f".{os.getpid()}.tmp")
            tmp.write_text(digest)
            os.replace(tmp, memo)
        except OSError:
            pass  # a read-only cache: hash again next process
    with _LOCK:
        _MEMO[key] = digest
    return digest


def folder_identity(folder: str | Path) -> str:
    """``sha256:<16 hex>`` over the names and contents of the folder's model files."""
    folder = Path(folder)
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and any(fnmatch(p.name, pat) for pat in MODEL_FILES)
    )
    if not files:
        raise ValueError(f"{folder} holds no model files (weights, config, tokenizer)")
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return "sha256:" + h.hexdigest()[:16]


def server_identity(entry: dict[str, Any] | None, model: str, revision: str | None) -> str:
    """The identity of a served model from its ``/v1/models`` entry (None: the server gave none)."""
    if entry is None:
        fields: dict[str, Any] = {"id": model, "unverified": True}
    else:
        fields = {k: entry[k] for k in SERVER_FIELDS if entry.get(k) not in (None, "")}
    if revision:
        fields["revision_set"] = revision
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    tag = "unverified" if entry is None else "served"
    return f"{tag}:{model}:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
