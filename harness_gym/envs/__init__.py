"""Task families. Each subpackage registers its tasks with :mod:`harness_gym.core.registry`."""
