"""Training language models through harnesses (TRL's ``SFTTrainer`` and ``GRPOTrainer``; extra ``trl``).

* :mod:`~harness_gym.train.chat_tokens`: a multi-turn episode as one token sequence, with an
  env mask that keeps observation tokens out of the loss;
* :mod:`~harness_gym.train.lm_dataset`: (task, harnesses, seeds) -> prompt rows, grouped
  ``within`` one harness or ``cross`` several;
* :mod:`~harness_gym.train.lm_rollout`: TRL's ``rollout_func``: episodes played with the
  trainer's model;
* :mod:`~harness_gym.train.lm_rewards`: reward functions reading what the rollout recorded;
* :mod:`~harness_gym.train.tool_env`: the ``environment_factory`` counterpart (the harness's
  tools as methods);
* :mod:`~harness_gym.train.grpo_lm`: configuration, training, saving and reloading;
* :mod:`~harness_gym.train.sft_lm`: supervised fine-tuning on oracle demonstrations rendered
  by the harness (the export rows), loss on the agent's tokens only;
* :mod:`~harness_gym.train.precision`: fp32, or bf16 where the machine has it;
* :mod:`~harness_gym.train.lm_scorer`: a model's log-probabilities of the harness's actions
  (for preference recovery).

Nothing here is imported by the rest of the package; torch, transformers and TRL are
imported when a function needs them.
"""
