"""Old name of ``eagle.cuda.finished`` (kept so existing imports keep working)."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("eagle.cuda.finished")
