"""adlnmt: NMT architectures as sentences of an Architecture Definition Language."""

__version__ = "0.1.0"
