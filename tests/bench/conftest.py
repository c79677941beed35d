"""The tiny Transformer's CTranslate2 export, from tests/export's fixtures."""

from export.conftest import ct2_export, tiny_models

__all__ = ["ct2_export", "tiny_models"]
