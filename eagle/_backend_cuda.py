"""Old name of ``eagle.cuda.backend`` (kept so existing imports keep working)."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("eagle.cuda.backend")
