"""Moved to :mod:`harness_gym.analysis.sweep.store`; this name is kept so old imports keep working.

The module object is the same one (not a copy), so patching a name here patches it there.
"""

import sys

from harness_gym.analysis.sweep.store import __name__ as _moved

sys.modules[__name__] = sys.modules[_moved]
