"""Run a model outside PyTorch: ONNX graphs for ONNX Runtime, CTranslate2 models for Transformer-shaped ADL.

``adlnmt export`` writes an export directory (:mod:`~adlnmt.export.directory`); ``--engine`` of ``translate``,
``Translator.load`` and ``bench decode`` runs one (:mod:`~adlnmt.inference.engines`). Modules: ``state`` (the decoder
state as named tensors), ``onnx`` (the graphs), ``onnx_engine`` (running them), ``ctranslate2_spec`` (the spec
mapping), ``ctranslate2`` (its engine), ``formats`` (export, check, manifest), ``faults`` (naming the layer an
export fails in), ``commands`` (the CLI). Translating an export with CTranslate2 imports no PyTorch.
"""
