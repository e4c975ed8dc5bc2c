"""Old name of :mod:`harness_gym.core.text_space` (it sat beside :mod:`harness_gym.core.space`,
the harness space); importing it warns, for one release."""

import warnings

from harness_gym.core.text_space import SharedTextView, UnicodeText

warnings.warn(
    "harness_gym.core.spaces is renamed harness_gym.core.text_space (UnicodeText is also "
    "harness_gym.UnicodeText)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["SharedTextView", "UnicodeText"]
