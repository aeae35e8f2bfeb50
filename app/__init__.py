"""spamsift: a self-hosted naive Bayes spam filter served over REST."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("spamsift")  # from pyproject.toml, as installed
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
