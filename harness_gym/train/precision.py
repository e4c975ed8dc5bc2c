"""Training precision: fp32, or bf16 where the machine runs it natively.

``auto`` picks bf16 on a CUDA GPU with bf16 or a CPU with AVX-512 BF16 / AMX (as oneDNN
reports it) and fp32 elsewhere; ``bf16`` on a machine without it is refused before training.
bf16 here is mixed precision (TRL's ``bf16=True``): fp32 master weights, bf16 autocast.
"""

from __future__ import annotations

PRECISIONS = ("auto", "fp32", "bf16")


class PrecisionError(ValueError):
    """A precision this machine cannot train in (the message says what to use instead)."""


def bf16_supported() -> bool:
    """Whether this machine runs bf16 matrix products natively (a CUDA GPU with bf16, or a CPU
    with AVX-512 BF16 / AMX, as oneDNN reports it)."""
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str) -> str:
    """``fp32`` or ``bf16``: ``auto`` is bf16 where the machine supports it, else fp32."""
    if precision not in PRECISIONS:
        raise PrecisionError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return "bf16" if bf16_supported() else "fp32"
    if precision == "bf16" and not bf16_supported():
        raise PrecisionError(
            "precision bf16 was asked for, but this machine has no native bf16 (no CUDA bf16, no "
            "AVX-512 BF16 / AMX on the CPU); use --precision fp32 or auto"
        )
    return precision
