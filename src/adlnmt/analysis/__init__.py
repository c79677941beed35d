"""Analysis beyond BLEU: forced-decoding scores of given translations (:mod:`adlnmt.analysis.forced`) and
contrastive (targeted) evaluation on suites of minimal pairs (:mod:`adlnmt.analysis.contrastive`), with suite
generators (:mod:`adlnmt.analysis.agreement`, :mod:`adlnmt.analysis.demo_suite`)."""
