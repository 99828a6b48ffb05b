"""The syntactic index of one module (`index.ModuleIndex`, built by `indexer.py`), the
import-alias table (`imports.py`) and small views of `ast` (`views.py`, `points.py`). Nothing
here knows about models or optimizers."""
