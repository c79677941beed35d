"""Translating with a trained model or an export: the search and everything it runs on.

Modules: ``options`` (search options and hypotheses, torch-free), ``stepper`` (incremental decoding of a model),
``search`` (greedy, beam, sampling, prefixes: the one search loop), ``ensemble``, ``cuda_graphs``, ``workers``
(forked decoding processes), ``engines`` (which engine runs a model or an export), ``onnx_engine`` and
``ctranslate2_engine`` (the export engines), ``translator`` (the Python API behind ``adlnmt translate``).
Importing this package imports neither PyTorch nor an engine's package.
"""
