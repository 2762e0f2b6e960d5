"""The suite's embedded model: Qwen2.5-Coder-0.5B, about twice as fast as the 1.5B default on two
cores (issue 72: the suite in 8 minutes). Every real-LLM test runs on it, through the same code
path as the default (assembly from its part packages, checksum, the server child, grammars).
`test_llm.py::test_the_default_model_is_assembled_checked_and_answers` keeps the 1.5B itself
covered, and the one test whose check needs what only the 1.5B writes well runs on it, saying
why (test_llm_drafts.py). conftest.py points "local" at the 0.5B through
HOPTRACE_LLM_MODEL, so the app and the CLI a test starts use it too."""
TEST_MODEL = "qwen2.5-coder-0.5b"


def real_llm():
    """The embedded model, started, with no response cache. The cache is shared by the run's
    workers, so a real-model test could be answered from another test's replies and pass with the
    model writing nothing (SAG's was, in one run: 0.3 s)."""
    from retrieval.llm import LLMSettings, get_llm

    return get_llm(LLMSettings.parse("local", cache=False)).start()


def cached_calls(run) -> list:
    """The run's LLM calls answered from the response cache (none, when the model wrote them all)."""
    return [c for s in run.stages for c in s.llm_calls if c.cached]
