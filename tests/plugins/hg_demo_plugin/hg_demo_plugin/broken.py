"""A plugin module that fails on import (its dependency is missing)."""

import hg_dependency_that_is_not_installed  # noqa: F401

Nope = None
