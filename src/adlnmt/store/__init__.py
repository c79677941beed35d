"""The one owner of the files of a model directory and of an export directory: their names
(:mod:`~adlnmt.store.names`), reading them (:class:`ModelDir`, :class:`ExportDir`) and the atomic writes and
JSON-lines records they are made of (:mod:`~adlnmt.store.atomic`). Importing it does not import PyTorch."""

from adlnmt.store.export_dir import ExportDir, is_export_dir
from adlnmt.store.model_dir import ModelDir, load_weights, new_model_id, weights_digest

__all__ = ["ExportDir", "ModelDir", "is_export_dir", "load_weights", "new_model_id", "weights_digest"]
