"""Sequence-level knowledge distillation (Kim & Rush 2016): a teacher translates the training source of a prepared
data directory, and its translations become the targets of a new data directory with the same vocabularies, which
students train on (:mod:`adlnmt.distill.kd`; the command ``adlnmt distill``: :mod:`adlnmt.distill.commands`).

It reads data directories (:mod:`adlnmt.data`) and translates with any engine (:mod:`adlnmt.inference`); grids run it
as a step between a teacher's run and its students' (:mod:`adlnmt.experiment.distill_step`).
"""
