"""Translating with a trained model or an export: the search and everything it runs on.

Modules: ``options`` (search options and hypotheses, torch-free), ``engine`` (the engine base class and every
engine's capabilities, torch-free), ``batching`` (length-sorted batches and the output length limit, shared by every
engine), ``stepper`` (incremental decoding of a model), ``search`` (greedy, beam, sampling, prefixes: the one
search loop, and the torch engine), ``ensemble``, ``cuda_graphs``, ``workers`` (forked decoding processes),
``engines`` (which engine runs a model or an export), ``onnx_engine`` and ``ctranslate2_engine`` (the export
engines), ``state`` (the decoder state as named tensors, for ONNX), ``ctranslate2_shape`` (which models CTranslate2
expresses), ``translator`` (the Python API behind ``adlnmt translate``).
Importing this package imports neither PyTorch nor an engine's package.
"""
