# The control plane image (web, decision API, celery worker, celery beat). BASE is the official Python
# image; where no registry is reachable, deploy/local-images.sh builds a stand-in (roster-python:bookworm).
ARG BASE=python:3.11-slim-bookworm
# The dependency list alone, out of pyproject.toml: the install below is cached on its content, so
# neither a code change nor another pyproject.toml edit reinstalls every package.
FROM ${BASE} AS requirements
COPY pyproject.toml /
RUN python -c "import tomllib; print('\\n'.join(tomllib.load(open('/pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /requirements.txt

FROM ${BASE}
RUN useradd --create-home --uid 10001 roster
# iptables: the dispatcher's preflight reads the host's lockdown rules (compose: host network, NET_ADMIN).
# It must use the host's backend (bookworm's default, nft); a legacy-iptables host would look empty.
# git: the workers' knowledge repositories (controlplane.knowledge.repo drives the git CLI).
RUN apt-get update && apt-get install -y --no-install-recommends iptables git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=requirements /requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt
COPY pyproject.toml README.md ./
COPY controlplane ./controlplane
COPY templates ./templates
COPY manage.py ./
# The built-in agent presets are data the control plane loads at migrate (controlplane.agents); read-only.
COPY workers/presets ./workers/presets
RUN pip install --no-cache-dir --no-deps .
# ROSTER_VAR_DIR: the settings create it at import, as the unprivileged user.
RUN install -d -o roster -g roster -m 700 /var/lib/roster /var/lib/roster/knowledge
# The admin's styles and scripts, collected once into the image; WhiteNoise serves them from the web
# process (DEBUG off). The key below only lets settings load for collectstatic; it signs nothing.
ENV ROSTER_STATIC_ROOT=/app/static
RUN ROSTER_DJANGO_SECRET_KEY=collectstatic-only ROSTER_VAR_DIR=/tmp/roster-build \
    python manage.py collectstatic --noinput -v 0 && rm -rf /tmp/roster-build
USER roster
ENV ROSTER_VAR_DIR=/var/lib/roster
EXPOSE 8000
CMD ["python", "-m", "daphne", "-b", "0.0.0.0", "-p", "8000", "controlplane.asgi:application"]
