# pydet: master, agent and the `determined` harness in one image.
#
#   scripts/docker/build-images.sh          builds pydet-base:trixie, then this as pydet-task:latest
#   docker build --network host -t pydet-task:latest .     (with a base image of your own: --build-arg BASE=...)
#
# The context is a pydet source tree: this checkout (scripts/webui.sh build first: the master
# serves the WebUI from its package), or the one pydet.cli.images assembles from an installed
# pydet, which carries this file as package data (pydet/cli/image/).
#
# The default command runs a master; `det-agent ...` runs an agent; the docker runtime also
# uses this image for tasks without environment.image (`python3 -m determined.exec.launch`).
# Run everything with --network host: pydet never uses bridge networks. README.md, "Docker".
ARG BASE=pydet-base:trixie
FROM ${BASE}

# A virtual environment first on PATH: `python3` in a task is the one that has `determined`,
# and Debian's own python3 stays untouched (PEP 668).
ENV PATH=/opt/pydet/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
# Authorities the build host trusts beyond the usual ones (see that folder's README.md).
COPY scripts/docker/ca-certificates/ /usr/local/share/ca-certificates/pydet/
RUN update-ca-certificates >/dev/null && python3 -m venv /opt/pydet
# OpenSSH's sshd for `det shell`, where the base lacks it (a base image of your own, or a
# pydet-base cached before its recipe included it): Debian's, from the base's apt.
RUN if [ ! -x /usr/sbin/sshd ]; then \
      apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           openssh-server openssh-client >/dev/null \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && test -x /usr/sbin/sshd

# Dependencies in their own layer, so that a change to the sources reinstalls only pydet.
COPY pyproject.toml /tmp/pydet/pyproject.toml
# With the notebook extra: `det notebook start` runs JupyterLab in this image, and
# `det tensorboard start` TensorBoard (a dependency of pydet).
RUN python3 -c "import tomllib; p = tomllib.load(open('/tmp/pydet/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['notebook']))" > /tmp/pydet/requirements.txt \
 && pip install --no-cache-dir -r /tmp/pydet/requirements.txt

# Only what the package is made of (.dockerignore keeps .venv and node_modules out).
COPY . /tmp/pydet/src/
RUN pip install --no-cache-dir --no-deps /tmp/pydet/src \
 && rm -rf /tmp/pydet \
 && mkdir -p /run/determined/workdir /var/lib/pydet \
 && python3 -c "import determined, pydet.master, pydet.agent, pydet.cli; print('pydet', determined.__version__)"

# The docker runtime reads this label: tasks in this image use the harness installed here
# instead of one mounted from the agent's host.
LABEL ai.pydet.harness="installed"
WORKDIR /run/determined/workdir
EXPOSE 8080
CMD ["det-master", "--host", "0.0.0.0", "--port", "8080", "--data-dir", "/var/lib/pydet/master"]
