"""The terminal tasks (Terminal-Bench style). ``TERMINAL_TASKS`` lists them all."""

from harness_gym.envs.terminal.tasks.data import (
    TermCsvColumnSum,
    TermJsonFilter,
    TermLogTopIp,
    TermSqliteTopCustomer,
)
from harness_gym.envs.terminal.tasks.files import (
    TermArchive,
    TermOrganizeFiles,
    TermPermissions,
    TermWriteScript,
)
from harness_gym.envs.terminal.tasks.git import TermFixBug, TermGitBranch, TermGitCommit, TermGitRevert
from harness_gym.envs.terminal.tasks.text import TermCountMatches, TermReplaceText, TermSortUnique

TERMINAL_TASKS = (
    TermSortUnique,
    TermCountMatches,
    TermReplaceText,
    TermCsvColumnSum,
    TermJsonFilter,
    TermSqliteTopCustomer,
    TermLogTopIp,
    TermOrganizeFiles,
    TermPermissions,
    TermArchive,
    TermWriteScript,
    TermGitCommit,
    TermGitBranch,
    TermGitRevert,
    TermFixBug,
)

__all__ = ["TERMINAL_TASKS", *[t.__name__ for t in TERMINAL_TASKS]]
