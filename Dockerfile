# spamsift: a small image (python:3.11-slim), built in two stages.
#   docker build -t spamsift .
#   docker run -p 8000:8000 -v spamsift-data:/data -e SPAMSIFT_ADMIN_KEY=… spamsift  # SQLite in /data
# A server listening on 0.0.0.0 needs an API key (SPAMSIFT_ADMIN_KEY seeds one): with none it
# refuses to start unless SPAMSIFT_ALLOW_NO_AUTHENTICATION=true says so.
#   docker run ... -e SPAMSIFT_DATABASE_URL=postgresql+psycopg://… spamsift
# The entry point is the `spamsift` command: the default command serves on 0.0.0.0:8000;
# `docker run spamsift db upgrade` (or `keys create …`) runs another sub-command.

# --- build: the spamsift wheel, installed with its dependencies into a virtualenv -------------
FROM python:3.11-slim AS build
# A C compiler for the compiled extensions (app/text/_core.pyx, app/bayes/_index.pyx), in this
# stage only: the run stage gets the built modules, not the tools.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY app ./app
COPY migrations ./migrations
# The extensions are optional to setuptools (a machine without a compiler still installs), so
# the image checks that they were built: SPAMSIFT_TOKENIZER=compiled would refuse to start.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/spamsift \
    && pip --python /opt/spamsift/bin/python install --no-cache-dir /wheels/spamsift-*.whl \
    && (cd / && /opt/spamsift/bin/python -c "import app.text._core, app.bayes._index") \
    && find /opt/spamsift -depth -type d -name tests -path '*/site-packages/*' -exec rm -rf {} +
# (numpy's and scipy's own test suites are ~50 MB that nothing imports at run time.)

# --- run: the virtualenv only (no build tools, sources, wheels or pip cache) ------------------
FROM python:3.11-slim
COPY --from=build /opt/spamsift /opt/spamsift
ENV PATH=/opt/spamsift/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SPAMSIFT_DATABASE_URL=sqlite:////data/spamsift.db
RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home spamsift
USER spamsift
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
# /healthz answers without a key and without the database; python, since the image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["spamsift"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
