"""LLM extraction for `hoptrace build --extractor llm`: GEAR triples, SAG events and GRASP
propositions, each with typed entities (prompts.py, tasks.py), run by extractor.py and
priced before any call by estimate.py."""
from dataclasses import replace
from typing import Optional

from ....llm.settings import check_draft_tokens
from .estimate import Estimate, estimate
from .extractor import LLMExtractor, UsageMeter, llm_extractors
from .tasks import TASKS

LAYERS = tuple(TASKS)

# N-gram drafts for extraction on the embedded model (llama-server's ngram-simple speculation,
# retrieval/llm/server.py): a triple copies its names from the passage, so several guessed tokens
# are often right. 3 was the fastest of 2, 3, 4, 6 and 8 on the same passages (docs/llm-indexing.md).
BUILD_DRAFT_TOKENS = 3


def extraction_settings(settings, draft_tokens: Optional[int] = None):
    """The LLM settings an extraction runs with: `--draft-tokens` if given, else
    HOPTRACE_DRAFT_TOKENS if set, else BUILD_DRAFT_TOKENS for the embedded model."""
    if settings is None or settings.backend != "local":
        return settings
    if draft_tokens is not None:
        return replace(settings, draft_tokens=check_draft_tokens(draft_tokens, "--draft-tokens"))
    if settings.draft_from_env:
        return settings
    return replace(settings, draft_tokens=BUILD_DRAFT_TOKENS)

__all__ = ["BUILD_DRAFT_TOKENS", "LAYERS", "extraction_settings", "Estimate", "LLMExtractor", "TASKS", "UsageMeter",
           "estimate", "llm_extractors"]
