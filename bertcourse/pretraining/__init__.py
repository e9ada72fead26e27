"""The parts of :mod:`bertcourse.pretrain`, one concern per module (the run loop itself, the
time budget and the report stay in ``bertcourse/pretrain.py``, which re-exports the names
below):

    config      PretrainConfig: every setting of a run, saved in every checkpoint
    checkpoint  save, load, and resume a run exactly
    evaluation  losses and statistics of a batch, the held-out set, the unigram baseline
    cli         python -m bertcourse.pretrain [train] | fill-mask | evaluate

Elsewhere: distributed set-up in :mod:`bertcourse.distributed`, fill-mask inference in
:mod:`bertcourse.fillmask`, the report's figures in :mod:`bertcourse.viz.training`.
"""
