"""The LLM-free extractor's relation patterns, each on a sentence whose right triple can be
stated (spaCy's en_core_web_sm parses them; the passages are made up)."""
import pytest

from retrieval.core.records import Passage
from retrieval.kb.extract.rules import RulesExtractor


def triples(title: str, text: str) -> set[tuple[str, str, str]]:
    ex = next(iter(RulesExtractor(("triples",), n_process=1).extract([Passage.make(title, text)])))
    return {(t.subject, t.predicate, t.object) for t in ex.triples}


@pytest.mark.parametrize("title, text, expected", [
    # a definite class noun stands for the title ("The journal …" after "X is a … journal")
    ("Journal of Ora Studies", "The Journal of Ora Studies is a quarterly journal. The journal was first published in "
                               "1963.",
     ("Journal of Ora Studies", "first published in", "1963")),
    # the clause of a copula's attribute is about the subject
    ("Film Weekly Ora", "Film Weekly Ora is a trade magazine published by Ora Media Group.",
     ("Film Weekly Ora", "published by", "Ora Media Group")),
    # a relative pronoun is the noun its clause modifies
    ("CKOR-FM", "CKOR-FM is a Canadian radio station that broadcasts a country music format.",
     ("CKOR-FM", "broadcasts", "country music format")),
    # a role owned by the title: "The editor is X" → (title, editor is, X)
    ("Journal of Ora Studies", "The Journal of Ora Studies is a journal. The editor is Martin Koch.",
     ("Journal of Ora Studies", "editor is", "Martin Koch")),
    # "on behalf of X": the frame noun is part of the relation, X the object
    ("Ora Review", "Ora Review is published by Wiley on behalf of the Ora Council for Small Business.",
     ("Ora Review", "published on behalf of", "Ora Council for Small Business")),
    # a name that a class noun introduces ("a planter called Devon")
    ("Devon Falls", "Devon Falls is named after a pioneer English coffee planter called Devon.",
     ("Devon Falls", "named after", "Devon")),
    # a subject-less "born" in a lead is about the person
    ("Kenji Treschuk", "Kenji Treschuk (born December 26, 1982 in Honolulu, Hawaii) is an American soccer player.",
     ("Kenji Treschuk", "born in", "Honolulu")),
    # the title's last word stands for it ("Snow moved …" in "Hank Snow")
    ("Hank Snow", "Snow moved to Nashville in 1949.", ("Hank Snow", "moved to", "Nashville")),
    # an open clausal complement joins the verb ("began recording for")
    ("Hank Snow", "Hank Snow began recording for RCA Victor in 1949.", ("Hank Snow", "began recording for",
                                                                        "RCA Victor")),
    # an appositive common noun with a preposition
    ("Kothmale Oya", "The falls are formed by Kothmale Oya, a tributary of the Mahaweli River.",
     ("Kothmale Oya", "tributary of", "Mahaweli River")),
    # a list of neighbours after "bordered by", whatever the parser makes of it
    ("Latvara", "Latvara is a country in Europe. It is bordered by Estonia to the north, Lithuania to the south, "
                "and Belarus to the southeast.", ("Latvara", "bordered by", "Lithuania")),
    # entity sweep: a participle the parser attaches to the nearest noun is still the title's
    ("CKOR-FM", "CKOR-FM is a Canadian radio station broadcasting at 97.3 FM in Prince George, British Columbia, "
                "owned by Vista Radio.", ("CKOR-FM", "owned by", "Vista Radio")),
    # birth and death dates in the lead's parenthesis
    ("Franjo Krežma", "Franjo Krežma (2 September 1862 – 15 June 1881) was a Croatian violinist and composer.",
     ("Franjo Krežma", "died on", "15 June 1881")),
    # a copula's attribute with appositions: each is what the subject is
    ("Wally Amos", "Wally Amos is an American TV personality, entrepreneur and author from Tallahassee.",
     ("Wally Amos", "is", "author")),
    # "one of X": the frame noun joins the relation
    ("Latvara", "Since its independence, Latvara has been referred to as one of the Baltic states.",
     ("Latvara", "referred as one of", "Baltic states")),
])
def test_pattern(title, text, expected):
    got = triples(title, text)
    assert expected in got, sorted(got)


def test_a_clause_between_a_noun_and_a_name_keeps_the_noun():
    got = triples("Good Theme", "Good Theme is the theme to the 1966 film of the same name, which was directed by "
                                "Sergio Leone.")
    assert not any(o == "Sergio Leone" and s == "Good Theme" for s, _, o in got), sorted(got)


def test_directions_and_nationalities_are_not_objects():
    got = triples("Latvara", "Latvara is a Baltic country. It is bordered by Estonia to the north and is a Canadian "
                             "partner.")
    assert ("Latvara", "bordered by", "Estonia") in got, sorted(got)
    assert not any(o in ("north", "Canadian") for _, _, o in got), sorted(got)


def test_the_sweep_keeps_a_named_subject_and_skips_an_indefinite_one():
    got = triples("Ora Festival", "The Ora Festival is held each May. Marcella Ruiz founded it in Turin. "
                                  "Many visitors travel from Milan.")
    assert ("Marcella Ruiz", "founded in", "Turin") in got, sorted(got)
    assert not any(s == "Ora Festival" and o == "Milan" for s, _, o in got), sorted(got)


def test_neighbours_are_listed_only_for_the_title():
    got = triples("Latvara", "Latvara is a Baltic country. Estonia borders Russia and Finland.")
    assert not any(s == "Latvara" and o in ("Russia", "Finland") for s, _, o in got), sorted(got)
