"""Old name of ``eagle.cuda.kernel_nodes`` (kept so existing imports keep working)."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("eagle.cuda.kernel_nodes")
