"""Run a model outside PyTorch: ONNX graphs for ONNX Runtime, CTranslate2 models for Transformer-shaped ADL.

``adlnmt export`` writes an export directory (:mod:`~adlnmt.export.directory`); ``--engine`` of ``translate``,
``Translator.load`` and ``bench decode`` runs one (:mod:`~adlnmt.inference.engines`; the engines and the decoder state
as named tensors, ``state``, are in :mod:`adlnmt.inference`). Modules: ``directory`` (the export directory),
``onnx`` (the graphs), ``ctranslate2_spec`` (the spec, from the match in
:mod:`adlnmt.inference.ctranslate2_shape`), ``formats`` (export, check, manifest), ``faults`` (naming the layer an
export fails in), ``commands`` (the CLI). Translating an export with CTranslate2 imports no PyTorch.
"""
