"""Models in and out of other toolkits' formats: Hugging Face MarianMT import (``adlnmt import --from hf-marian``) and
export (``adlnmt export --format hf-marian``), and a Hub-ready folder with a model card (``adlnmt publish``).

The core never imports ``transformers``: these modules read and write the files themselves (safetensors, JSON,
sentencepiece models); only the tests compare against ``transformers`` (the ``hf`` extra)."""
