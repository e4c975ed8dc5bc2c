"""The protocols other trainers speak: trajectory export for SFT (:mod:`.export`), an
OpenEnv-compatible environment server (:mod:`.openenv_server`, extra ``openenv``), a verifiers
taskset (:mod:`.verifiers_env`, extra ``verifiers``: ``vf-eval harness-gym-verifiers``) and a
registered skyrl-gym text env with its dataset rows (:mod:`.skyrl`, extra ``skyrl``).

Each route reuses the package's own rendering (the env's observations, the harness's system
prompt, tools and worked examples, :mod:`harness_gym.llm.chat`), so what a trainer sees is
what the harness renders. See docs/integrations.md.
"""
