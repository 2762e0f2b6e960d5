"""The grouped method picker offers every registered method and variant exactly once."""
from retrieval.methods import method_names
from ui.picker import EXPECTED_S, GROUPS, all_grouped, expected, group_info


def test_every_method_is_in_exactly_one_group():
    """Built-in methods and variants by paper; a user's own (plugins) go in the Ask tab's "Yours"
    group instead, which lists them as they are loaded."""
    from retrieval.methods.plugins import user_methods

    grouped = all_grouped()
    assert sorted(grouped) == sorted(n for n in method_names() if n not in user_methods())
    assert not set(grouped) & set(user_methods())
    assert len(grouped) == len(set(grouped))


def test_each_group_names_its_tables_and_each_method_its_expected_time():
    assert all(g.tables for g in GROUPS)
    assert expected("bm25", llm="none") == f"~{EXPECTED_S['bm25'] * 1000:.0f} ms"
    assert expected("sag", llm="none") == "needs an LLM"
    assert expected("gear", llm="none") == "runs as NaiveGE without an LLM"
    assert expected("sag", llm="local") == "~10–20 s"  # retrieval p50 on 50 demo questions, two sittings
    assert expected("sag", llm="openai") == "time set by the endpoint"
    assert expected("sag_no_rerank", llm="local") == "~2 s"  # one sitting's p50
    assert expected("grasp_uniform", llm="local") == "time not measured"
    info = group_info(("griever", "composed"), llm="local")
    assert info == (f"griever ~{EXPECTED_S['griever'] * 1000:.0f} ms · "
                    f"composed ~{EXPECTED_S['composed'] * 1000:.0f} ms")
