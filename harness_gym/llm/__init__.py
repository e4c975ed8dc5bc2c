"""Language-model agents: chat rendering, backends and batched rollouts.

Nothing here imports a heavy dependency at import time: ``openai``, ``torch`` and
``transformers`` are imported by the backend that needs them (extra ``llm``).
"""
