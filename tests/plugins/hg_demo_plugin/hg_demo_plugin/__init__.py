"""A tiny harness-gym plugin: the task PickLargest, the format ini_like, the tool style slash
and the agent first-legal, all declared as entry points in pyproject.toml.

``bad`` holds tasks that break the package's task rules and ``broken`` a module that fails on
import; the tests declare entry points to them to check what ``harness-gym check`` and the
plugin loader say.
"""
