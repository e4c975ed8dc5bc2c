"""The terminal tasks as data: each task id and where its class lives.

``import harness_gym`` registers the terminal family's ids from this table alone, so it imports
no sandbox or task module (``tests/test_families.py`` checks the table against
:data:`~harness_gym.envs.terminal.tasks.TERMINAL_TASKS`, in the same order).
"""

from __future__ import annotations

#: Task id -> ``"module:Class"``, in the order of ``TERMINAL_TASKS``.
TASK_CLASSES: dict[str, str] = {
    "TermSortUnique": "harness_gym.envs.terminal.tasks.text:TermSortUnique",
    "TermCountMatches": "harness_gym.envs.terminal.tasks.text:TermCountMatches",
    "TermReplaceText": "harness_gym.envs.terminal.tasks.text:TermReplaceText",
    "TermCsvColumnSum": "harness_gym.envs.terminal.tasks.data:TermCsvColumnSum",
    "TermJsonFilter": "harness_gym.envs.terminal.tasks.data:TermJsonFilter",
    "TermSqliteTopCustomer": "harness_gym.envs.terminal.tasks.data:TermSqliteTopCustomer",
    "TermLogTopIp": "harness_gym.envs.terminal.tasks.data:TermLogTopIp",
    "TermOrganizeFiles": "harness_gym.envs.terminal.tasks.files:TermOrganizeFiles",
    "TermPermissions": "harness_gym.envs.terminal.tasks.files:TermPermissions",
    "TermArchive": "harness_gym.envs.terminal.tasks.files:TermArchive",
    "TermWriteScript": "harness_gym.envs.terminal.tasks.files:TermWriteScript",
    "TermGitCommit": "harness_gym.envs.terminal.tasks.git:TermGitCommit",
    "TermGitBranch": "harness_gym.envs.terminal.tasks.git:TermGitBranch",
    "TermGitRevert": "harness_gym.envs.terminal.tasks.git:TermGitRevert",
    "TermFixBug": "harness_gym.envs.terminal.tasks.git:TermFixBug",
    "TermGitMergeConflict": "harness_gym.envs.terminal.tasks.git:TermGitMergeConflict",
    "TermGitCherryPick": "harness_gym.envs.terminal.tasks.git:TermGitCherryPick",
    "TermFixUnittest": "harness_gym.envs.terminal.tasks.code:TermFixUnittest",
    "TermWordFreq": "harness_gym.envs.terminal.tasks.code:TermWordFreq",
    "TermCsvToJson": "harness_gym.envs.terminal.tasks.data:TermCsvToJson",
    "TermSqliteUpdate": "harness_gym.envs.terminal.tasks.data:TermSqliteUpdate",
    "TermLogErrorsPerHour": "harness_gym.envs.terminal.tasks.data:TermLogErrorsPerHour",
    "TermExtractArchive": "harness_gym.envs.terminal.tasks.files:TermExtractArchive",
    "TermCleanTempFiles": "harness_gym.envs.terminal.tasks.files:TermCleanTempFiles",
    "TermDedupeFiles": "harness_gym.envs.terminal.tasks.files:TermDedupeFiles",
}

#: What builds a terminal task's env (``task=, harness=, render_mode=, terminal=``).
ENTRY_POINT = "harness_gym.envs.terminal.env:make_terminal_env"
#: The Gymnasium id of one Harbor task folder: ``gym.make(HARBOR_ENV_ID, task_dir=PATH, harness=...)``.
HARBOR_ENV_ID = "harness_gym/Harbor-v0"
HARBOR_ENTRY_POINT = "harness_gym.envs.terminal.harbor:make_harbor_env"
#: Folders of Harbor tasks registered by ``register_harbor_folder`` (``os.pathsep``-joined), so
#: that worker processes (a sweep's) find the same task ids: the family registers them at import.
HARBOR_DIRS_VARIABLE = "HARNESS_GYM_HARBOR_DIRS"
