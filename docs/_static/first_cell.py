# Colab or Kaggle: install eagle (and CuPy where there is a GPU). Elsewhere: only check the imports.
import os, shutil, subprocess, sys
EAGLE_PIP_SOURCE = "eagle-replay"  # eagle's distribution name; a git URL or a path to a checkout works too
if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ or "KAGGLE_KERNEL_RUN_TYPE" in os.environ:
    packages = [EAGLE_PIP_SOURCE] + (["cupy-cuda12x"] if shutil.which("nvidia-smi") else [])
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *packages], check=True)
import numpy, eagle
print(f"eagle {eagle.__version__}, numpy {numpy.__version__}, {eagle.get_num_threads()} threads")
