"""Plots used by the book. One module per group of chapters; import the one you need:

    from bertcourse.viz import tokenization  # chapter 0: vocabulary size, [UNK] rate, parameters
    from bertcourse.viz import attention   # chapter 1: score variance, softmax saturation, heatmaps
    from bertcourse.viz import masks       # chapter 2: masks as images, padding invariance
    from bertcourse.viz import mlm         # chapter 3: masking distributions, 80/10/10 shares
    from bertcourse.viz import training    # chapters 4-7: loss, NSP, Adam, schedules, model

Every plot function takes numbers computed by the caller with bertcourse (the plots never
compute the results they show) and returns a `matplotlib.figure.Figure`.

`book_ext.py` in this folder is not part of the package API: it is the Sphinx extension that
the book's `_config.yml` loads (it is imported by Sphinx alone, as a top-level module).
"""
