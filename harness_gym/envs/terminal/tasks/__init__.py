"""The terminal tasks (Terminal-Bench style). ``TERMINAL_TASKS`` lists them all."""

from harness_gym.envs.terminal.tasks.code import TermFixUnittest, TermWordFreq
from harness_gym.envs.terminal.tasks.data import (
    TermCsvColumnSum,
    TermCsvToJson,
    TermJsonFilter,
    TermLogErrorsPerHour,
    TermLogTopIp,
    TermSqliteTopCustomer,
    TermSqliteUpdate,
)
from harness_gym.envs.terminal.tasks.files import (
    TermArchive,
    TermCleanTempFiles,
    TermDedupeFiles,
    TermExtractArchive,
    TermOrganizeFiles,
    TermPermissions,
    TermWriteScript,
)
from harness_gym.envs.terminal.tasks.git import (
    TermFixBug,
    TermGitBranch,
    TermGitCherryPick,
    TermGitCommit,
    TermGitMergeConflict,
    TermGitRevert,
)
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
    TermGitMergeConflict,
    TermGitCherryPick,
    TermFixUnittest,
    TermWordFreq,
    TermCsvToJson,
    TermSqliteUpdate,
    TermLogErrorsPerHour,
    TermExtractArchive,
    TermCleanTempFiles,
    TermDedupeFiles,
)

__all__ = ["TERMINAL_TASKS", *[t.__name__ for t in TERMINAL_TASKS]]
