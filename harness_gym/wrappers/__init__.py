"""Gymnasium wrappers: harness perturbations, harness sampling, and adapters for RL libraries."""

from harness_gym.wrappers.discrete import DiscreteActions
from harness_gym.wrappers.encoding import HashedFeatures, TextEncoder
from harness_gym.wrappers.harness_wrapper import HarnessWrapper
from harness_gym.wrappers.perturbation import (
    ChangeControl,
    ChangeToolNaming,
    DropTools,
    PerturbHarness,
    Reformat,
    RenameArguments,
    RenameTools,
    ReorderFields,
    ReorderTools,
    RestyleTools,
    RewriteDescriptions,
)
from harness_gym.wrappers.sampler import SampleHarness

__all__ = [
    "ChangeControl",
    "ChangeToolNaming",
    "DiscreteActions",
    "DropTools",
    "HarnessWrapper",
    "HashedFeatures",
    "PerturbHarness",
    "Reformat",
    "RenameArguments",
    "RenameTools",
    "ReorderFields",
    "ReorderTools",
    "RestyleTools",
    "RewriteDescriptions",
    "SampleHarness",
    "TextEncoder",
]
