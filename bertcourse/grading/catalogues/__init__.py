"""Catalogues of known mistakes, one module per chapter (`chNN.py` with a `CATALOGUE` dict of
lists of `bertcourse.grading.mistakes.Mistake`); a test cell names one as "chNN:key"."""
