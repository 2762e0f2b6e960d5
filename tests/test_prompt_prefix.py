"""Prefix-stable prompts: two requests of one step, with different inputs, start with the same
tokens through the step's fixed instructions, so llama.cpp resumes from its cached prefix
instead of reading the instructions again. Tokens come from the embedded model's own
tokenizer over the ChatML rendering the server uses."""
from __future__ import annotations

import pytest

from retrieval.core.records import Passage
from retrieval.llm.backends import chatml
from retrieval.methods import answer
from retrieval.methods.gear import prompts as gear
from retrieval.methods.grasp import prompts as grasp
from retrieval.methods.sag import prompts as sag


@pytest.fixture(scope="module")
def tokenize():
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.models import gguf_tokenizer, model_file
    try:
        return gguf_tokenizer(model_file())
    except LLMUnavailable as e:
        pytest.skip(str(e))


P1 = [Passage("a", "Lake Vesna", "Lake Vesna lies in the north of the country."), Passage("b", "Ora", "Ora is a town.")]
P2 = [Passage("c", "Kessing Tunnel", "The Kessing Tunnel opened in 1911 and carries a railway.")]

# step → (fixed instructions, request 1, request 2): requests differ in every input they take.
STEPS = {
    "gear read": (gear.READ_INSTRUCTIONS, gear.read_messages("Who founded Ora?", P1, [], 80, 5),
                  gear.read_messages("When did the tunnel open?", P2, [("Ora", "in", "north")], 150, 8)),
    "gear reason": (gear.REASON_INSTRUCTIONS, gear.reason_messages("Who founded Ora?", []),
                    gear.reason_messages("When?", [("a", "b", "c")])),
    "gear reason+rewrite": (gear.REASON_REWRITE_INSTRUCTIONS, gear.reason_rewrite_messages("Who founded Ora?", []),
                            gear.reason_rewrite_messages("When?", [("a", "b", "c")])),
    "gear rewrite": (gear.REWRITE_INSTRUCTIONS, gear.rewrite_messages("Who founded Ora?", [], "nothing known"),
                     gear.rewrite_messages("When?", [("a", "b", "c")], "date missing")),
    "sag entities": (sag.ENTITY_INSTRUCTIONS, sag.entity_messages("Who founded Ora?"),
                     sag.entity_messages("When did the Kessing Tunnel open?")),
    "sag rerank": (sag.RERANK_INSTRUCTIONS, sag.rerank_messages("Who founded Ora?", [("Ora is a town.", ["Ora"])], 5),
                   sag.rerank_messages("When?", [("The tunnel opened.", ["Kessing Tunnel", "1911"])] * 20, 2, 3)),
    "grasp plan": (grasp.PLAN_INSTRUCTIONS, grasp.plan_messages("Who founded Ora?"), grasp.plan_messages("When?")),
    "grasp rewrite": (grasp.REWRITE_INSTRUCTIONS, grasp.rewrite_messages("Q1", "Who founded Ora?", []),
                      grasp.rewrite_messages("Q2", "When did #1 open?", [("Who?", "Ada")])),
    "grasp select": (grasp.SELECT_INSTRUCTIONS, grasp.select_messages("Who?", [("Ora", ["Ora is a town."])], []),
                     grasp.select_messages("When?", [("Tunnel", [])] * 3, ["seen"])),
    "grasp evaluate": (grasp.EVALUATE_INSTRUCTIONS,
                       grasp.evaluate_messages("Q1", "Who?", [], [], [("Ora", "Ora is a town.")], True),
                       grasp.evaluate_messages("Q2", "When?", [("a", "b")], ["x"], [], False)),
    "grasp synthesis": (grasp.SYNTHESIS_INSTRUCTIONS, grasp.synthesis_messages("Q1", []),
                        grasp.synthesis_messages("Q2", [("a", "b")])),
    "answer": (answer.ANSWER_INSTRUCTIONS, answer.answer_messages("Who?", [("Ora", "Ora is a town.")]),
               answer.answer_messages("When?", [])),
}


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.parametrize("step", sorted(STEPS))
def test_requests_of_a_step_share_their_fixed_part_as_a_token_prefix(tokenize, step):
    fixed, first, second = STEPS[step]
    # The fixed part as the server sees it: system message, then the user turn up to the inputs.
    head = chatml([first[0], {"role": "user", "content": fixed}])
    n_fixed = len(tokenize(head[: head.rindex(fixed) + len(fixed)]))
    a, b = tokenize(chatml(first)), tokenize(chatml(second))
    assert n_fixed > 30, f"{step}: the fixed part is only {n_fixed} tokens; is it really the instructions?"
    # A token may merge across the boundary into the inputs; all but the last one must match.
    assert _common_prefix(a, b) >= n_fixed - 1, (
        f"{step}: requests share {_common_prefix(a, b)} leading tokens, the fixed part has {n_fixed}")
    assert first[1]["content"].startswith(fixed) and second[1]["content"].startswith(fixed)
