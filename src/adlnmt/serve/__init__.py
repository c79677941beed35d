"""``adlnmt serve``: an HTTP translation server (FastAPI on uvicorn) with cross-request batching, limits on every
request, a health and a model-description endpoint, and a web page showing translations, n-best lists, source
attention and the model's architecture diagram.

Modules: :mod:`.limits` (the options and limits), :mod:`.schema` (request and response JSON), :mod:`.parsing`
(bytes to a checked request, or an error status), :mod:`.batching` (requests merged into shared searches),
:mod:`.model_info` (``GET /model``), :mod:`.app` (the application), :mod:`.commands` (the CLI); ``static/`` holds
the web page.
"""
