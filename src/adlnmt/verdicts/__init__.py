"""The rules a reviewer reads, in one place: how a claim about two rows of a table is tested and what its verdict
says. ``statistics`` holds the two-level bootstrap with its Monte Carlo errors, the tests and their error rate per
claim kind, the minimum detectable effect, the verdict words and ``MIN_SEEDS``; ``claims`` the claims themselves
(registration, Holm families fixed at registration, the marks on a measured verdict) and how ``claims.md`` and
``claims.json`` state them; ``ranks`` the rank agreement with a paper's table; ``page`` the verdict table of
docs/reproductions.md. Nothing here imports :mod:`adlnmt.experiment`, which gathers the measurements of a grid's runs
and uses these rules (:mod:`adlnmt.experiment.judge`)."""
