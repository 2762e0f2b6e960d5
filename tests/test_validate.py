import pytest

from retrieval.core.errors import InputError
from retrieval.core.validate import check_question


@pytest.mark.parametrize("text,message", [
    ("", "question is empty"), ("   \n\t", "question is empty"),
    ("x" * 10_000, "10,000 characters long; the limit is 2,000"),
    (None, "question must be text"), ("a\x00b", "NUL"),
])
def test_bad_questions_are_refused_with_the_reason(text, message):
    with pytest.raises(InputError, match=message):
        check_question(text)


def test_a_good_question_is_stripped():
    assert check_question("  Who?  ") == "Who?"
