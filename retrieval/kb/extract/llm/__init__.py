"""LLM extraction for `hoptrace build --extractor llm`: GEAR triples, SAG events and GRASP
propositions, each with typed entities (prompts.py, tasks.py), run by extractor.py and
priced before any call by estimate.py."""
from .estimate import Estimate, estimate
from .extractor import LLMExtractor, UsageMeter, llm_extractors
from .tasks import TASKS

LAYERS = tuple(TASKS)

__all__ = ["LAYERS", "Estimate", "LLMExtractor", "TASKS", "UsageMeter", "estimate", "llm_extractors"]
