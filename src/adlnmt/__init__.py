"""adlnmt: NMT architectures as sentences of an Architecture Definition Language.

``from adlnmt import Translator, SearchOptions`` gives the translation API (imported lazily, so ``import adlnmt``
stays cheap).
"""

from typing import Any

from adlnmt.version import __version__

__all__ = ["SearchOptions", "Translator", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Translator":
        from adlnmt.inference.translator import Translator

        return Translator
    if name == "SearchOptions":
        from adlnmt.inference.options import SearchOptions

        return SearchOptions
    raise AttributeError(f"module 'adlnmt' has no attribute {name!r}")
