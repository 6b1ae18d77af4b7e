# Colab or Kaggle: install eagle (and CuPy where there is a GPU). Elsewhere: only check the imports.
# eagle is not on the package index yet: upload its source archive (`python -m build --sdist` in a
# clone writes dist/eagle_replay-<version>.tar.gz) or a clone, and name it here if it is not found.
import glob, os, shutil, subprocess, sys
EAGLE_PIP_SOURCE = ""  # a path to eagle's source archive or clone; "" looks for an uploaded archive
if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ or "KAGGLE_KERNEL_RUN_TYPE" in os.environ:
    found = sorted(glob.glob("eagle_replay-*.tar.gz") + glob.glob("/content/eagle_replay-*.tar.gz")
                   + glob.glob("/kaggle/input/**/eagle_replay-*.tar.gz", recursive=True))
    source = EAGLE_PIP_SOURCE or (found[-1] if found else None)
    if source is None:
        raise SystemExit("eagle is not on the package index yet: upload eagle_replay-<version>.tar.gz "
                         "(python -m build --sdist in a clone) and run this cell again, or set "
                         "EAGLE_PIP_SOURCE to the path of the archive or of a clone")
    packages = [source] + (["cupy-cuda12x"] if shutil.which("nvidia-smi") else [])
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *packages], check=True)
import numpy, eagle
print(f"eagle {eagle.__version__}, numpy {numpy.__version__}, {eagle.get_num_threads()} threads")
