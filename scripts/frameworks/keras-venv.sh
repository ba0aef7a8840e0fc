#!/usr/bin/env bash
# Makes .venv-keras: pydet's .venv plus TensorFlow (CPU) and Keras 3, for the Keras tests
# and for running Keras trials on a local cluster (idempotent; quick when nothing changed).
#
# TensorFlow stays out of .venv: torch.utils.tensorboard imports TensorFlow whenever it is
# installed, which costs every PyTorch and DeepSpeed trial that writes TensorBoard files
# seconds and memory. .venv-keras sees everything .venv has (a .pth file adds .venv's
# site-packages, pydet included), so an agent started with .venv-keras/bin/python runs
# tasks whose `python3` has both pydet and TensorFlow.
set -euo pipefail
cd "$(dirname "$0")/../.."

TENSORFLOW=${TENSORFLOW:-tensorflow-cpu==2.21.0}
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first (no .venv)" >&2; exit 1; }
base=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -x .venv-keras/bin/python ]; then
  .venv/bin/python -m venv --without-pip .venv-keras
fi
own=$(.venv-keras/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir also reads .venv's own .pth files (pydet's editable install is one).
echo "import site; site.addsitedir('$base')" > "$own/pydet-venv.pth"
stamp=.venv-keras/.pydet-installed
if [ "$(cat "$stamp" 2>/dev/null)" != "$TENSORFLOW" ]; then
  # pip from .venv, installing into .venv-keras: what .venv has counts as installed.
  .venv-keras/bin/python -m pip install -q "$TENSORFLOW"
  echo "$TENSORFLOW" > "$stamp"
fi
.venv-keras/bin/python -c 'import keras, tensorflow, determined; print("keras", keras.__version__, "tensorflow", tensorflow.__version__)'
