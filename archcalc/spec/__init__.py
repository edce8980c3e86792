"""What a model is: ModelSpec (model.py), Hugging Face config.json import (hf/),
and finding a model by file or bundled name (catalog.py)."""
